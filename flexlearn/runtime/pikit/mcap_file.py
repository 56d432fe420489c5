"""A minimal MCAP writer in the standard library: schemas, channels and messages, with a summary section.

MCAP (https://mcap.dev/spec) is the container ROS 2 records in and Foxglove and rerun play. The file written
here is the plain, unchunked layout of the specification, version 0:

    magic · Header · (Schema | Channel | Message)* · DataEnd · [Schema* Channel* Statistics] · Footer · magic

with every record ``opcode (u8) · length (u64) · content`` in little endian, strings as ``u32 length · UTF-8``
and the summary section (schemas, channels and message statistics) after the data so that readers find every
channel without scanning. No compression and no chunk index: the writer needs no third-party package, which
keeps a Raspberry Pi's install at torch and numpy. Readers that seek (the ``mcap`` package's
``make_reader``, Foxglove) read it as it is; a file of many minutes loads more slowly in Foxglove than an
indexed one (re-index it with ``mcap recover`` if that matters).

The file is written to ``<path>.partial`` and renamed onto ``path`` by :meth:`McapWriter.close`, so a reader
never sees a half-written file under the final name.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import BinaryIO, Dict, Optional

__all__ = ["McapWriter", "MAGIC"]

MAGIC = b"\x89MCAP0\r\n"
_HEADER, _FOOTER, _SCHEMA, _CHANNEL, _MESSAGE, _STATISTICS, _DATA_END = 0x01, 0x02, 0x03, 0x04, 0x05, 0x0B, 0x0F


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack("<I", len(data)) + data


def _string_map(items: Dict[str, str]) -> bytes:
    body = b"".join(_string(k) + _string(v) for k, v in items.items())
    return struct.pack("<I", len(body)) + body


def _record(opcode: int, content: bytes) -> bytes:
    return struct.pack("<BQ", opcode, len(content)) + content


class McapWriter:
    """Write one MCAP file: register schemas and channels, then messages in any time order.

    Args:
        path: the file to write (its folder must exist); written as ``<path>.partial`` until :meth:`close`.
        profile: the MCAP profile ('' for JSON / Foxglove messages, 'ros2' for CDR messages).
        library: the writer's name recorded in the header.

    Use as a context manager; an exception inside the ``with`` block removes the partial file.
    """

    def __init__(self, path: os.PathLike | str, profile: str = "", library: str = "flexlearn") -> None:
        self.path = Path(path)
        self._partial = self.path.with_name(self.path.name + ".partial")
        self._file: Optional[BinaryIO] = open(self._partial, "wb")
        self._crc = zlib.crc32(MAGIC)  # the data section's CRC runs from the file's first byte
        self._schemas: list[bytes] = []
        self._channels: list[bytes] = []
        self._counts: Dict[int, int] = {}
        self._times = [2**64 - 1, 0]
        self._file.write(MAGIC)
        self._data(_record(_HEADER, _string(profile) + _string(library)))

    def _data(self, blob: bytes) -> None:
        assert self._file is not None, "the MCAP file is closed"
        self._crc = zlib.crc32(blob, self._crc)
        self._file.write(blob)

    def add_schema(self, name: str, encoding: str, data: bytes) -> int:
        """Register a schema; returns its id ≥ 1.

        Args:
            name: the message type's name (e.g. ``foxglove.SceneUpdate``).
            encoding: the schema's encoding (``jsonschema``, ``ros2msg``, ``protobuf``).
            data: the schema itself (for ``jsonschema``: its JSON text).
        """
        sid = len(self._schemas) + 1
        rec = _record(_SCHEMA, struct.pack("<H", sid) + _string(name) + _string(encoding) + _u32_bytes(data))
        self._schemas.append(rec)
        self._data(rec)
        return sid

    def add_channel(self, topic: str, schema_id: int, message_encoding: str = "json", metadata=None) -> int:
        """Register a channel (topic); returns its id ≥ 1.

        Args:
            topic: the topic name (``/robot/backbone``).
            schema_id: the id :meth:`add_schema` returned for its messages.
            message_encoding: how each message is encoded (``json``, ``cdr``, ``protobuf``).
            metadata: string pairs stored with the channel.
        """
        cid = len(self._channels) + 1
        content = struct.pack("<HH", cid, schema_id) + _string(topic) + _string(message_encoding)
        rec = _record(_CHANNEL, content + _string_map(dict(metadata or {})))
        self._channels.append(rec)
        self._counts[cid] = 0
        self._data(rec)
        return cid

    def write_message(self, channel_id: int, log_time_ns: int, data: bytes, publish_time_ns: Optional[int] = None):
        """Append one message (messages may come in any time order).

        Args:
            channel_id: the id :meth:`add_channel` returned.
            log_time_ns: when it was logged [ns since the epoch or the recording's start], 0 .. 2⁶⁴ − 1.
            data: the encoded message.
            publish_time_ns: when it was published [ns] (default: ``log_time_ns``).

        Raises:
            ValueError: an unknown channel or a time outside the range.
        """
        if channel_id not in self._counts:
            raise ValueError(f"MCAP channel {channel_id} was not added")
        if not 0 <= log_time_ns < 2**64:
            raise ValueError(f"MCAP log time {log_time_ns} ns is outside 0 .. 2^64 - 1")
        seq = self._counts[channel_id]
        pub = log_time_ns if publish_time_ns is None else publish_time_ns
        self._data(_record(_MESSAGE, struct.pack("<HIQQ", channel_id, seq & 0xFFFFFFFF, log_time_ns, pub) + data))
        self._counts[channel_id] = seq + 1
        self._times = [min(self._times[0], log_time_ns), max(self._times[1], log_time_ns)]

    def _statistics(self) -> bytes:
        n = sum(self._counts.values())
        start, end = (self._times[0], self._times[1]) if n else (0, 0)
        head = struct.pack("<QHIIIIQQ", n, len(self._schemas), len(self._channels), 0, 0, 0, start, end)
        per_channel = b"".join(struct.pack("<HQ", cid, c) for cid, c in self._counts.items())
        return _record(_STATISTICS, head + struct.pack("<I", len(per_channel)) + per_channel)

    def close(self) -> Path:
        """Write the summary and footer, and move the file onto its final name; returns the path."""
        if self._file is None:
            return self.path
        f = self._file
        f.write(_record(_DATA_END, struct.pack("<I", self._crc)))
        summary_start = f.tell()
        summary = b"".join(self._schemas + self._channels) + self._statistics()
        f.write(summary)
        footer_head = struct.pack("<BQ", _FOOTER, 20) + struct.pack("<QQ", summary_start, 0)
        f.write(footer_head + struct.pack("<I", zlib.crc32(footer_head, zlib.crc32(summary))) + MAGIC)
        f.flush()
        os.fsync(f.fileno())
        f.close()
        self._file = None
        os.replace(self._partial, self.path)
        return self.path

    def discard(self) -> None:
        """Drop the partial file (nothing is left under either name)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._partial.unlink(missing_ok=True)

    def __enter__(self) -> "McapWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.discard()


def _u32_bytes(data: bytes) -> bytes:
    return struct.pack("<I", len(data)) + data
