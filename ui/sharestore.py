"""The share links' store: whole comparisons (the comparison JSON that the page exports) kept in
memory under random ids for the server's life, so that a link reopens one in a fresh tab without
the target. No Gradio here.

Bounded: one comparison at most ``max_item`` bytes of JSON (the import limit, so whatever is
stored reads back), all of them at most ``max_total`` bytes compressed; past that the oldest are
dropped (their links then say "unknown or expired"). The same comparison shared again gets the
same id.

    store = ShareStore()
    sid = store.put(json_bytes)          # ShareError when too large
    raw = store.get(sid)                 # ShareError when unknown, expired or malformed
"""
from __future__ import annotations

import hashlib
import re
import secrets
import threading
import zlib
from collections import OrderedDict

from dominotree.trace import MAX_TRACE_BYTES

ID_BYTES = 12                           # 16 URL-safe characters: not guessable
ID_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
MAX_TOTAL = 256 * 2**20                 # compressed bytes of every stored comparison together


class ShareError(ValueError):
    """A share id that names nothing stored, or a comparison too large to store."""


class ShareStore:
    def __init__(self, max_item: int = MAX_TRACE_BYTES, max_total: int = MAX_TOTAL):
        self.max_item, self.max_total = max_item, max_total
        self._items: OrderedDict[str, bytes] = OrderedDict()    # id -> zlib(JSON), oldest first
        self._by_hash: dict[str, str] = {}                      # sha256 of the JSON -> id
        self._hash_of: dict[str, str] = {}
        self._size = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def size(self) -> int:
        """Compressed bytes held now."""
        return self._size

    def put(self, raw: bytes) -> str:
        """Store one comparison's JSON bytes; its id (the same id for the same bytes)."""
        if not isinstance(raw, (bytes, bytearray)) or not raw:
            raise ShareError("nothing to share: the comparison is empty")
        if len(raw) > self.max_item:
            raise ShareError(f"this comparison is {len(raw) / 2**20:.1f} MiB of JSON; a share link holds at most "
                             f"{self.max_item / 2**20:.0f} MiB (download the comparison JSON instead)")
        digest = hashlib.sha256(raw).hexdigest()
        packed = zlib.compress(bytes(raw), 6)
        if len(packed) > self.max_total:
            raise ShareError("this comparison is larger than the whole share store")
        with self._lock:
            sid = self._by_hash.get(digest)
            if sid is not None:
                self._items.move_to_end(sid)            # shared again: it is the newest
                return sid
            sid = secrets.token_urlsafe(ID_BYTES)
            while sid in self._items:
                sid = secrets.token_urlsafe(ID_BYTES)
            self._items[sid] = packed
            self._by_hash[digest], self._hash_of[sid] = sid, digest
            self._size += len(packed)
            while self._size > self.max_total:
                old, data = self._items.popitem(last=False)
                self._size -= len(data)
                self._by_hash.pop(self._hash_of.pop(old), None)
        return sid

    def get(self, sid) -> bytes:
        """The JSON bytes stored under ``sid``; ShareError (with a message for the page) when the id
        is malformed or names nothing stored (never stored, or dropped to stay under the cap)."""
        if not isinstance(sid, str) or not ID_RE.match(sid):
            raise ShareError("this share link's id is malformed (copy the whole link)")
        with self._lock:
            packed = self._items.get(sid)
        if packed is None:
            raise ShareError("this share link is unknown or has expired (links last until the server restarts, "
                             "and the oldest go when many are kept)")
        return zlib.decompress(packed)
