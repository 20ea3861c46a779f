"""A parquet file with some columns replaced and every other column chunk copied as bytes.

Renumbering an assembled episode changes two of a data file's columns (``episode_index`` and ``index``);
decoding and re-encoding the others (the state above all) cost most of the time assembling took.
``replace_columns`` writes the new columns with pyarrow into a small side file with the same row
groups, then lays the source's column chunks and the side file's new ones one after the other and
writes a footer whose offsets, sizes and statistics follow them: the other columns keep their pages,
encodings and statistics byte for byte. Files this cannot splice safely (page indexes, bloom filters,
encryption, columns nested below the top level) return ``None``, and the caller rewrites them whole.

The footer is Thrift's compact protocol (the parquet format's ``FileMetaData``); the small codec below
reads it into field lists and writes them back unchanged except where a value is set, so fields it does
not know survive.
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

MAGIC = b"PAR1"

# Thrift compact protocol types
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)

# parquet.thrift field ids used here
_FMD_ROW_GROUPS, _FMD_ENCRYPTION = 4, 8
_RG_COLUMNS, _RG_TOTAL_BYTE_SIZE, _RG_NUM_ROWS, _RG_FILE_OFFSET, _RG_TOTAL_COMPRESSED = 1, 2, 3, 5, 6
_CC_FILE_PATH, _CC_FILE_OFFSET, _CC_META = 1, 2, 3
_CC_INDEXES = (4, 5, 6, 7, 8, 9)  # offset/column index offsets and lengths, crypto metadata
_CMD_PATH, _CMD_UNCOMPRESSED, _CMD_COMPRESSED = 3, 6, 7
_CMD_DATA_PAGE, _CMD_INDEX_PAGE, _CMD_DICTIONARY_PAGE, _CMD_BLOOM = 9, 10, 11, 14


class _Struct:
    """A decoded Thrift struct: its fields as ``[field id, type, value]`` in the order read."""

    __slots__ = ("fields",)

    def __init__(self, fields: list[list[Any]]):
        self.fields = fields

    def get(self, fid: int, default: Any = None) -> Any:
        for field in self.fields:
            if field[0] == fid:
                return field[2]
        return default

    def set(self, fid: int, value: Any) -> None:
        for field in self.fields:
            if field[0] == fid:
                field[2] = value
                return
        raise KeyError(fid)


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        value = self.data[self.pos]
        self.pos += 1
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, kind: int) -> Any:
        if kind in (_TRUE, _FALSE):  # in a container a boolean is a byte of its own
            return self.byte() == _TRUE
        if kind == _BYTE:
            return struct.unpack("b", bytes([self.byte()]))[0]
        if kind in (_I16, _I32, _I64):
            return self.zigzag()
        if kind == _DOUBLE:
            self.pos += 8
            return struct.unpack("<d", self.data[self.pos - 8 : self.pos])[0]
        if kind == _BINARY:
            size = self.varint()
            self.pos += size
            return self.data[self.pos - size : self.pos]
        if kind in (_LIST, _SET):
            header = self.byte()
            size, element = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            return (element, [self.value(element) for _ in range(size)])
        if kind == _MAP:
            size = self.varint()
            types = self.byte() if size else 0
            return (types, [(self.value(types >> 4), self.value(types & 0x0F)) for _ in range(size)])
        if kind == _STRUCT:
            return self.struct()
        raise ValueError(f"unknown Thrift type {kind}")

    def struct(self) -> _Struct:
        fields = []
        last = 0
        while True:
            header = self.byte()
            kind = header & 0x0F
            if kind == _STOP:
                return _Struct(fields)
            delta = header >> 4
            fid = last + delta if delta else self.zigzag()
            value = (kind == _TRUE) if kind in (_TRUE, _FALSE) else self.value(kind)
            fields.append([fid, kind, value])
            last = fid


def _varint(out: bytearray, n: int) -> None:
    while True:
        if n < 0x80:
            out.append(n)
            return
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def _zigzag(out: bytearray, n: int) -> None:
    _varint(out, (n << 1) ^ (n >> 63))


def _write_value(out: bytearray, kind: int, value: Any) -> None:
    if kind in (_TRUE, _FALSE):
        out.append(_TRUE if value else _FALSE)
    elif kind == _BYTE:
        out += struct.pack("b", value)
    elif kind in (_I16, _I32, _I64):
        _zigzag(out, value)
    elif kind == _DOUBLE:
        out += struct.pack("<d", value)
    elif kind == _BINARY:
        _varint(out, len(value))
        out += value
    elif kind in (_LIST, _SET):
        element, items = value
        if len(items) < 15:
            out.append(len(items) << 4 | element)
        else:
            out.append(0xF0 | element)
            _varint(out, len(items))
        for item in items:
            _write_value(out, element, item)
    elif kind == _MAP:
        types, items = value
        _varint(out, len(items))
        if items:
            out.append(types)
        for key, item in items:
            _write_value(out, types >> 4, key)
            _write_value(out, types & 0x0F, item)
    elif kind == _STRUCT:
        _write_struct(out, value)
    else:
        raise ValueError(f"unknown Thrift type {kind}")


def _write_struct(out: bytearray, value: _Struct) -> None:
    last = 0
    for fid, kind, item in value.fields:
        if kind in (_TRUE, _FALSE):
            kind = _TRUE if item else _FALSE
        if 0 < fid - last <= 15:
            out.append((fid - last) << 4 | kind)
        else:
            out.append(kind)
            _zigzag(out, fid)
        if kind not in (_TRUE, _FALSE):
            _write_value(out, kind, item)
        last = fid
    out.append(_STOP)


def read_footer(data: bytes) -> tuple[_Struct, int]:
    """The ``FileMetaData`` of a whole parquet file's bytes and where it starts."""
    if len(data) < 12 or data[:4] != MAGIC or data[-4:] != MAGIC:
        raise ValueError("not a parquet file")
    size = struct.unpack("<I", data[-8:-4])[0]
    start = len(data) - 8 - size
    if start < 4:
        raise ValueError("parquet footer size out of range")
    return _Reader(data[start : len(data) - 8]).struct(), start


def footer_bytes(metadata: _Struct) -> bytes:
    out = bytearray()
    _write_struct(out, metadata)
    return bytes(out)


def _chunk_range(chunk: _Struct) -> tuple[int, int]:
    meta = chunk.get(_CC_META)
    start = meta.get(_CMD_DATA_PAGE)
    dictionary = meta.get(_CMD_DICTIONARY_PAGE)
    if dictionary is not None and 0 < dictionary < start:
        start = dictionary
    return start, meta.get(_CMD_COMPRESSED)


def _spliceable(metadata: _Struct) -> bool:
    if metadata.get(_FMD_ENCRYPTION) is not None:
        return False
    for group in metadata.get(_FMD_ROW_GROUPS)[1]:
        for chunk in group.get(_RG_COLUMNS)[1]:
            meta = chunk.get(_CC_META)
            if (meta is None or chunk.get(_CC_FILE_PATH) is not None
                    or any(chunk.get(fid) is not None for fid in _CC_INDEXES)
                    or meta.get(_CMD_INDEX_PAGE) is not None or meta.get(_CMD_BLOOM) is not None):
                return False
    return True


def _moved(chunk: _Struct, shift: int) -> _Struct:
    """The column chunk's metadata with its offsets moved by ``shift`` bytes."""
    meta = chunk.get(_CC_META)
    for fid in (_CMD_DATA_PAGE, _CMD_DICTIONARY_PAGE):
        if meta.get(fid) is not None:
            meta.set(fid, meta.get(fid) + shift)
    if chunk.get(_CC_FILE_OFFSET):  # 0 when the writer leaves the deprecated field unset
        chunk.set(_CC_FILE_OFFSET, chunk.get(_CC_FILE_OFFSET) + shift)
    return chunk


def replace_columns(
    source: bytes, columns: dict[str, pa.Array], *, schema: pa.Schema | None = None, **write_options: Any
) -> bytes | None:
    """The bytes of ``source`` (a whole parquet file) with the top-level ``columns`` replaced by the given
    values (same type and length as the file's); ``None`` when the file cannot be spliced.
    ``write_options`` go to pyarrow's writer for the new columns (a file does not record the options it
    was written with). ``schema``: the file's arrow schema, when the caller has read it already."""
    parts = replace_column_parts(source, columns, schema=schema, **write_options)
    return None if parts is None else b"".join(parts)


def replace_column_parts(
    source: bytes, columns: dict[str, pa.Array], *, schema: pa.Schema | None = None, **write_options: Any
) -> list[memoryview] | None:
    """``replace_columns`` as the pieces of the new file, in order (views of ``source`` and of the new
    columns' bytes, then the footer), to be written and hashed one after the other without joining them
    into one copy of the file."""
    try:
        metadata, _ = read_footer(source)
    except (ValueError, IndexError, struct.error):
        return None
    if not _spliceable(metadata):
        return None
    if schema is None:
        schema = pq.ParquetFile(pa.BufferReader(source)).schema_arrow
    groups = metadata.get(_FMD_ROW_GROUPS)[1]
    if (any(len(group.get(_RG_COLUMNS)[1]) != len(schema) for group in groups)
            or any(name not in schema.names for name in columns)):
        return None  # a nested column spans several chunks: not handled here
    places = [schema.get_field_index(name) for name in columns]
    side = pa.BufferOutputStream()
    sizes = [group.get(_RG_NUM_ROWS) for group in groups]
    new_schema = pa.schema([schema.field(i) for i in places])
    table = pa.table([columns[name] for name in columns], schema=new_schema)
    with pq.ParquetWriter(side, new_schema, **write_options) as writer:
        first = 0
        for size in sizes:
            writer.write_table(table.slice(first, size), row_group_size=max(1, size))
            first += size
    side_bytes = side.getvalue().to_pybytes()
    side_metadata, _ = read_footer(side_bytes)
    side_groups = side_metadata.get(_FMD_ROW_GROUPS)[1]
    if len(side_groups) != len(sizes) or not _spliceable(side_metadata):
        return None

    parts: list[memoryview] = [memoryview(MAGIC)]
    position = len(MAGIC)
    views = {True: memoryview(side_bytes), False: memoryview(source)}
    for group, side_group in zip(metadata.get(_FMD_ROW_GROUPS)[1], side_groups, strict=True):
        chunks = group.get(_RG_COLUMNS)[1]
        new_chunks = dict(zip(places, side_group.get(_RG_COLUMNS)[1], strict=True))
        group_start = position
        uncompressed = compressed = 0
        for i, chunk in enumerate(chunks):
            body = views[i in new_chunks]
            chunk = new_chunks.get(i, chunk)
            start, size = _chunk_range(chunk)
            piece = body[start : start + size]
            if len(piece) != size:
                return None  # a chunk that runs past the end of its file
            parts.append(piece)
            position += size
            _moved(chunk, group_start + compressed - start)
            chunks[i] = chunk
            meta = chunk.get(_CC_META)
            uncompressed += meta.get(_CMD_UNCOMPRESSED)
            compressed += meta.get(_CMD_COMPRESSED)
        group.set(_RG_TOTAL_BYTE_SIZE, uncompressed)
        for fid, value in ((_RG_FILE_OFFSET, group_start), (_RG_TOTAL_COMPRESSED, compressed)):
            if group.get(fid) is not None:
                group.set(fid, value)
    footer = footer_bytes(metadata)
    parts.append(memoryview(footer + struct.pack("<I", len(footer)) + MAGIC))
    return parts
