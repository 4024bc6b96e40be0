"""Machine and version facts, recorded with every measurement: ``dominotree.machine`` (the library
uses them too), importable here as the bench modules always have."""
from ..machine import cpu_isa, cpu_model, hardware_info, versions_info  # noqa: F401
