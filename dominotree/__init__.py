"""DominoTree: lossless tree-structured speculative decoding with conditional Domino scores.

    from dominotree import load_pair, Decoder, DecodeConfig, TreeConfig
    dec = Decoder(load_pair("random-tiny"))
    trace = dec.generate("Hello", DecodeConfig(method="dominotree"))
"""
from .config import METHODS, STAGES, ConfigError, DecodeConfig, TreeConfig
from .trace import DecodeTrace, RoundTrace, load_trace
from .tree import Tree

__all__ = ["METHODS", "STAGES", "ConfigError", "DecodeConfig", "TreeConfig", "DecodeTrace", "RoundTrace",
           "load_trace", "Tree", "load_pair", "Decoder"]


def __getattr__(name):  # keep `import dominotree` light: transformers loads on first use
    if name == "load_pair":
        from .presets import load_pair
        return load_pair
    if name == "Decoder":
        from .decode import Decoder
        return Decoder
    raise AttributeError(name)
