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

import numpy as np
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
    return _chunk_range_of(chunk.get(_CC_META))


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


# page header fields (parquet.thrift PageHeader, DataPageHeader, DictionaryPageHeader)
_PH_TYPE, _PH_UNCOMPRESSED, _PH_COMPRESSED, _PH_DATA, _PH_DICTIONARY = 1, 2, 3, 5, 7
_DATA_PAGE, _DICTIONARY_PAGE = 0, 2
_DPH_NUM_VALUES, _DPH_ENCODING, _DPH_DEFINITION, _DPH_REPETITION = 1, 2, 3, 4
_PLAIN, _PLAIN_DICTIONARY, _RLE, _RLE_DICTIONARY = 0, 2, 3, 8
_CMD_TYPE, _CMD_CODEC, _CMD_NUM_VALUES = 1, 4, 5
_FLOAT = 4
_CODECS = {0: None, 1: "snappy", 2: "gzip", 4: "brotli", 6: "zstd", 7: "lz4_raw"}


def float_list_values(source: bytes, leaf: int, width: int, *, max_definition: int,
                      max_repetition: int) -> np.ndarray | None:
    """The values of a column of float32 lists of ``width`` values each, none of them null (the parquet leaf
    ``leaf`` of ``source``, a whole file), as a (rows, width) float32 array decoded straight from its pages:
    plain or dictionary-encoded values, version 1 data pages, any codec pyarrow can decompress. Their levels
    are checked, not decoded: every definition level must be ``max_definition`` and the repetition levels the
    same encoded bytes for every list, one list's worth starting each list. ``None`` for anything else (nulls,
    lists of other lengths, other encodings or page kinds), for the caller to read the column with pyarrow.
    The values are those pyarrow's reader gives, without its building of list arrays."""
    if max_repetition != 1:
        return None
    try:
        metadata, _ = read_footer(source)
        groups = metadata.get(_FMD_ROW_GROUPS)[1]
        parts = []
        for group in groups:
            meta = group.get(_RG_COLUMNS)[1][leaf].get(_CC_META)
            if meta is None or meta.get(_CMD_TYPE) != _FLOAT or meta.get(_CMD_CODEC) not in _CODECS:
                return None
            values = _chunk_values(source, meta, width, max_definition, max_repetition)
            if values is None:
                return None
            parts.append(values)
    except (ValueError, IndexError, KeyError, TypeError, OSError, struct.error, pa.ArrowException):
        return None  # damaged: pyarrow's reader says how
    values = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return values.reshape(-1, width)


def _chunk_values(source: bytes, meta: _Struct, width: int, max_definition: int,
                  max_repetition: int) -> np.ndarray | None:
    start, size = _chunk_range_of(meta)
    codec = _CODECS[meta.get(_CMD_CODEC)]
    decompress = pa.Codec(codec).decompress if codec else None
    total = meta.get(_CMD_NUM_VALUES)
    dictionary = None
    parts: list[np.ndarray] = []
    done = 0
    position, end = start, start + size
    reader = _Reader(source)
    while position < end:
        reader.pos = position
        header = reader.struct()
        compressed = header.get(_PH_COMPRESSED)
        body = memoryview(source)[reader.pos : reader.pos + compressed]
        position = reader.pos + compressed
        if len(body) != compressed or position > end:
            return None
        kind = header.get(_PH_TYPE)
        if kind not in (_DATA_PAGE, _DICTIONARY_PAGE):  # version 2 data pages (levels uncompressed) among them
            return None
        uncompressed = header.get(_PH_UNCOMPRESSED)
        page = memoryview(body if decompress is None else decompress(body, decompressed_size=uncompressed))
        if len(page) != uncompressed:
            return None
        if kind == _DICTIONARY_PAGE:
            about = header.get(_PH_DICTIONARY)
            if dictionary is not None or about.get(_DPH_ENCODING) not in (_PLAIN, _PLAIN_DICTIONARY):
                return None
            dictionary = np.frombuffer(page, "<f4", count=about.get(_DPH_NUM_VALUES))
            continue
        about = header.get(_PH_DATA)
        count = about.get(_DPH_NUM_VALUES)
        if count % width or about.get(_DPH_DEFINITION) != _RLE or about.get(_DPH_REPETITION) != _RLE:
            return None
        levels, offset = _levels(page, 0)
        if not _one_list_each(levels, width, count // width):
            return None
        if max_definition:
            levels, offset = _levels(page, offset)
            if not _all_equal(levels, count, max_definition):
                return None
        encoding = about.get(_DPH_ENCODING)
        if encoding == _PLAIN:
            if len(page) - offset < 4 * count:
                return None
            parts.append(np.frombuffer(page, "<f4", count=count, offset=offset))
        elif encoding in (_RLE_DICTIONARY, _PLAIN_DICTIONARY) and dictionary is not None:
            indices = _hybrid(page[offset + 1 :], page[offset], count)
            if indices is None:
                return None
            parts.append(dictionary.take(indices))  # an index past the dictionary raises IndexError
        else:
            return None
        done += count
    if done != total:
        return None
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _chunk_range_of(meta: _Struct) -> tuple[int, int]:
    """Where a column chunk's pages start (its dictionary page, if any) and their size."""
    start = meta.get(_CMD_DATA_PAGE)
    dictionary = meta.get(_CMD_DICTIONARY_PAGE)
    if dictionary is not None and 0 < dictionary < start:
        start = dictionary
    return start, meta.get(_CMD_COMPRESSED)


def _levels(page: memoryview, offset: int) -> tuple[memoryview, int]:
    """A version 1 data page's levels (their byte length, then the RLE/bit-packed runs) at ``offset``."""
    size = struct.unpack_from("<I", page, offset)[0]
    if offset + 4 + size > len(page):
        raise ValueError("levels run past their page")
    return page[offset + 4 : offset + 4 + size], offset + 4 + size


def _all_equal(levels: memoryview, count: int, level: int) -> bool:
    """Whether ``levels`` are one run of ``count`` times ``level`` (one byte wide: levels below 256)."""
    reader = _Reader(bytes(levels))
    header = reader.varint()
    return header == count << 1 and level < 256 and reader.pos + 1 == len(levels) and levels[reader.pos] == level


def _one_list_each(levels: memoryview, width: int, lists: int) -> bool:
    """Whether repetition levels (bit width 1) are ``lists`` lists of ``width`` values: the runs of the first
    list decode to 0 then ``width - 1`` ones, end there, and the rest repeats their bytes (as pyarrow encodes
    lists of more than a few values), or else every level decoded is so."""
    data = bytes(levels)
    reader = _Reader(data)
    decoded: list[int] = []
    while len(decoded) < width and reader.pos < len(data):
        header = reader.varint()
        if header & 1:  # bit-packed groups of eight one-bit levels
            groups = header >> 1
            packed = data[reader.pos : reader.pos + groups]
            reader.pos += groups
            decoded += [(byte >> bit) & 1 for byte in packed for bit in range(8)]
        else:
            decoded += [data[reader.pos]] * (header >> 1)
            reader.pos += 1
    one = data[: reader.pos]
    if decoded == [0] + [1] * (width - 1) and len(one) * lists == len(data) and one * lists == data:
        return True
    # not one list to a run boundary (narrow lists share bit-packed groups): every level decoded
    levels_decoded = _hybrid(levels, 1, width * lists)
    if levels_decoded is None:
        return False
    expected = np.ones((lists, width), dtype=levels_decoded.dtype)
    expected[:, 0] = 0
    return bool(np.array_equal(levels_decoded, expected.reshape(-1)))


def _hybrid(data: memoryview, bit_width: int, count: int) -> np.ndarray | None:
    """The first ``count`` values of RLE/bit-packed hybrid runs of ``bit_width``-bit values (dictionary
    indices). Bit-packed runs are unpacked together, eight values at a time as numpy columns."""
    if not 0 < bit_width <= 32:
        return None
    raw = bytes(data)
    view = memoryview(raw)
    end = len(raw)
    packed: list[memoryview] = []
    runs: list[tuple[int, int, int]] = []  # repeated runs: where they start among the values, length, value
    value_bytes = (bit_width + 7) // 8
    decoded = position = 0
    while decoded < count:
        header = raw[position]  # the run's header, a varint (read here: a run every few hundred values)
        position += 1
        if header & 0x80:
            header &= 0x7F
            shift = 7
            while True:
                byte = raw[position]
                position += 1
                header |= (byte & 0x7F) << shift
                if not byte & 0x80:
                    break
                shift += 7
        length = header >> 1
        if header & 1:
            size = length * bit_width
            packed.append(view[position : position + size])
            position += size
            decoded += length * 8
        else:
            runs.append((decoded, length, int.from_bytes(raw[position : position + value_bytes], "little")))
            position += value_bytes
            decoded += length
        if position > end or length == 0:
            return None
    unpacked = _unpack(b"".join(packed), bit_width)
    if not runs:
        return unpacked[:count]
    out = np.empty(decoded, dtype=np.intp)
    taken = done = 0
    for first, length, value in runs:
        out[done:first] = unpacked[taken : taken + first - done]
        taken += first - done
        out[first : first + length] = value
        done = first + length
    out[done:] = unpacked[taken : taken + decoded - done]
    return out[:count]


def _unpack(packed: bytes, bit_width: int) -> np.ndarray:
    """Bit-packed values, least significant bit first: eight values in every ``bit_width`` bytes."""
    groups = len(packed) // bit_width
    padded = packed + bytes(8)
    out = np.empty((groups, 8), dtype=np.intp)
    mask = np.uint64((1 << bit_width) - 1)
    for k in range(8):
        bit = k * bit_width
        words = np.ndarray((groups,), dtype="<u8", buffer=padded, offset=bit >> 3, strides=(bit_width,))
        out[:, k] = (words >> np.uint64(bit & 7)) & mask
    return out.reshape(-1)
