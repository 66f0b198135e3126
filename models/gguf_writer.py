"""A small GGUF v3 writer and reader (no dependency beyond the standard library;
numpy is used for tensor data when given numpy arrays).

Format (https://github.com/ggerganov/ggml/blob/master/docs/gguf.md), all little-endian:

    magic "GGUF" | u32 version (3) | u64 n_tensors | u64 n_kv
    n_kv x  { string key | u32 value_type | value }
    n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
    padding to `general.alignment` (32 here)
    tensor data, each tensor starting at a multiple of the alignment (offset is
    relative to the start of this data section)

A string is u64 length + UTF-8 bytes (no terminator); an array is
u32 element type + u64 count + elements.  ne[0] is the contiguous dimension:
a row-major array of shape (rows, cols) is written as ne = (cols, rows), so a
torch Linear weight [out, in] has ne = (in, out).

add_tensor_f32 writes F32 tensors; add_tensor_raw writes a tensor of any ggml
type from its encoded bytes (blocks as ggml lays them out), produced while the
file is written so that large models need not be held in memory.  The reader
decodes F32, F16 and BF16 and returns the other types as raw block bytes.
"""
import mmap
import struct

ALIGNMENT = 32

# GGUF metadata value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(13)

_SCALAR_FMT = {
    T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I", T_INT32: "<i",
    T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d",
}

GGML_TYPE_F32 = 0
GGML_TYPE_F16 = 1
GGML_TYPE_BF16 = 30

# ggml tensor types: name -> (type id, elements per block, bytes per block)
GGML_TYPES = {
    "f32": (0, 1, 4), "f16": (1, 1, 2), "bf16": (30, 1, 2),
    "q4_0": (2, 32, 18), "q4_1": (3, 32, 20), "q5_0": (6, 32, 22), "q5_1": (7, 32, 24), "q8_0": (8, 32, 34),
    "q2_K": (10, 256, 84), "q3_K": (11, 256, 110), "q4_K": (12, 256, 144), "q5_K": (13, 256, 176),
    "q6_K": (14, 256, 210), "iq4_nl": (20, 32, 18), "iq4_xs": (23, 256, 136),
}
GGML_TYPE_NAMES = {v[0]: k for k, v in GGML_TYPES.items()}


def type_info(ggml_type):
    """(name, elements per block, bytes per block) of a type id or name."""
    if isinstance(ggml_type, str):
        tid, blck, size = GGML_TYPES[ggml_type]
        return ggml_type, blck, size
    name = GGML_TYPE_NAMES.get(ggml_type)
    if name is None:
        raise ValueError("unknown ggml type %r" % (ggml_type,))
    return (name,) + GGML_TYPES[name][1:]


def tensor_nbytes(ne, ggml_type):
    """Bytes of a tensor of shape ne (ne[0] contiguous) in a ggml type; ne[0]
    must be a whole number of blocks."""
    _, blck, size = type_info(ggml_type)
    if ne[0] % blck:
        raise ValueError("row of %d elements is not a multiple of the %d-element block" % (ne[0], blck))
    n = ne[0] // blck * size
    for x in ne[1:]:
        n *= x
    return n


class Val:
    """A typed metadata value: Val(T_UINT32, 5), Val(T_ARRAY, [..], elem=T_INT32)."""

    def __init__(self, vtype, value, elem=None):
        self.vtype, self.value, self.elem = vtype, value, elem


def _pack_str(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _pack_value(vtype, value, elem=None):
    if vtype == T_STRING:
        return _pack_str(value)
    if vtype == T_ARRAY:
        if elem is None:
            raise ValueError("array needs an element type")
        out = [struct.pack("<IQ", elem, len(value))]
        if elem == T_STRING:
            out.extend(_pack_str(v) for v in value)
        elif elem == T_ARRAY:
            raise ValueError("nested arrays are not supported")
        else:
            fmt = _SCALAR_FMT[elem]
            out.append(struct.pack("<%d%s" % (len(value), fmt[1]), *value))
        return b"".join(out)
    return struct.pack(_SCALAR_FMT[vtype], value)


def _pad(n, a=ALIGNMENT):
    return (a - n % a) % a


class GGUFWriter:
    def __init__(self, path):
        self.path = path
        self.kv = []        # (key, Val)
        self.tensors = []   # (name, ne tuple, ggml type id, nbytes, bytes or chunk producer)

    # metadata helpers
    def add(self, key, vtype, value, elem=None):
        if any(k == key for k, _ in self.kv):
            raise ValueError("duplicate key " + key)
        self.kv.append((key, Val(vtype, value, elem)))

    def add_u32(self, key, v): self.add(key, T_UINT32, int(v))
    def add_i32(self, key, v): self.add(key, T_INT32, int(v))
    def add_f32(self, key, v): self.add(key, T_FLOAT32, float(v))
    def add_bool(self, key, v): self.add(key, T_BOOL, bool(v))
    def add_str(self, key, v): self.add(key, T_STRING, v)
    def add_arr(self, key, elem, values): self.add(key, T_ARRAY, list(values), elem)
    def add_val(self, key, val): self.add(key, val.vtype, val.value, val.elem)

    def _add_tensor(self, name, ne, ggml_type, nbytes, data):
        if any(t[0] == name for t in self.tensors):
            raise ValueError("duplicate tensor " + name)
        self.tensors.append((name, tuple(int(x) for x in ne), ggml_type, nbytes, data))

    def add_tensor_f32(self, name, array):
        """array: a C-contiguous numpy float32 array in row-major order (shape
        (d_{n-1}, ..., d_0)); written with ne = reversed(shape)."""
        import numpy as np
        a = np.ascontiguousarray(array, dtype="<f4")
        self._add_tensor(name, tuple(reversed(a.shape)), GGML_TYPE_F32, a.nbytes, a.tobytes())

    def add_tensor_raw(self, name, ne, ggml_type, data):
        """A tensor of shape ne (ne[0] contiguous) in any ggml type (id or name)
        from its encoded bytes: a bytes-like object, or a callable returning an
        iterable of bytes-like chunks, called while the file is written.  The
        total must be exactly the type's size for ne."""
        tid = GGML_TYPES[ggml_type][0] if isinstance(ggml_type, str) else int(ggml_type)
        nbytes = tensor_nbytes(ne, tid)
        if not callable(data) and memoryview(data).nbytes != nbytes:
            raise ValueError("tensor %s: %d bytes given, its type and shape need %d"
                             % (name, memoryview(data).nbytes, nbytes))
        self._add_tensor(name, ne, tid, nbytes, data)

    def write(self):
        head = [b"GGUF", struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))]
        for key, v in self.kv:
            head.append(_pack_str(key))
            head.append(struct.pack("<I", v.vtype))
            head.append(_pack_value(v.vtype, v.value, v.elem))
        offset = 0
        for name, ne, tid, nbytes, _ in self.tensors:
            head.append(_pack_str(name))
            head.append(struct.pack("<I", len(ne)))
            head.append(struct.pack("<%dQ" % len(ne), *ne))
            head.append(struct.pack("<IQ", tid, offset))
            offset += nbytes + _pad(nbytes)
        header = b"".join(head)
        with open(self.path, "wb") as f:
            f.write(header)
            f.write(b"\0" * _pad(len(header)))
            for name, _, _, nbytes, data in self.tensors:
                written = 0
                for chunk in (data() if callable(data) else (data,)):
                    f.write(chunk)
                    written += memoryview(chunk).nbytes
                if written != nbytes:
                    raise ValueError("tensor %s: %d bytes produced, %d expected" % (name, written, nbytes))
                f.write(b"\0" * _pad(nbytes))


# ---------------------------------------------------------------- reader

class _Buf:
    def __init__(self, data):
        self.d, self.o = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.o)
        self.o += struct.calcsize(fmt)
        return v

    def str(self):
        (n,) = self.take("<Q")
        s = self.d[self.o:self.o + n]
        if len(s) != n:
            raise ValueError("truncated string")
        self.o += n
        return s.decode("utf-8")

    def value(self, vtype):
        return self.typed_value(vtype).value

    def typed_value(self, vtype):
        if vtype == T_STRING:
            return Val(vtype, self.str())
        if vtype == T_ARRAY:
            elem, n = self.take("<IQ")
            if elem == T_STRING:
                return Val(vtype, [self.str() for _ in range(n)], elem)
            fmt = _SCALAR_FMT[elem]
            return Val(vtype, list(self.take("<%d%s" % (n, fmt[1]))), elem)
        return Val(vtype, self.take(_SCALAR_FMT[vtype])[0])


def _rows(ne):
    n = 1
    for x in ne[1:]:
        n *= x
    return n


def read_gguf(path, load_tensors=True, typed=False):
    """Parses a GGUF file. Returns (metadata dict, tensors dict name -> numpy array
    of shape reversed(ne)) (tensors are None when load_tensors is False), plus
    a third dict name -> (ne, ggml_type, absolute file offset).
    F32, F16 and BF16 tensors are decoded to float32; other types are returned
    as their raw bytes, a uint8 array of shape reversed(ne[1:]) + (row bytes,).
    typed=True gives metadata values as Val objects (type kept, for copying)."""
    with open(path, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    b = _Buf(data)
    if b.take("<4s")[0] != b"GGUF":
        raise ValueError("not a GGUF file")
    (version,) = b.take("<I")
    if version != 3:
        raise ValueError("GGUF version %d" % version)
    n_t, n_kv = b.take("<QQ")
    meta = {}
    for _ in range(n_kv):
        key = b.str()
        (vt,) = b.take("<I")
        if key in meta:
            raise ValueError("duplicate key " + key)
        meta[key] = b.typed_value(vt) if typed else b.value(vt)
    info = {}
    for _ in range(n_t):
        name = b.str()
        (nd,) = b.take("<I")
        ne = b.take("<%dQ" % nd)
        gtype, off = b.take("<IQ")
        info[name] = (tuple(ne), gtype, off)
    align = meta.get("general.alignment", ALIGNMENT)
    align = align.value if isinstance(align, Val) else align
    base = b.o + _pad(b.o, align)
    tensors = None
    if load_tensors:
        import numpy as np
        tensors = {}
        for name, (ne, gtype, off) in info.items():
            if off % align:
                raise ValueError("tensor %s misaligned" % name)
            start = base + off
            nbytes = tensor_nbytes(ne, gtype)
            if start + nbytes > len(data):
                raise ValueError("tensor %s runs past the end of the file" % name)
            if gtype in (GGML_TYPE_F32, GGML_TYPE_F16):
                dt = {GGML_TYPE_F32: "<f4", GGML_TYPE_F16: "<f2"}[gtype]
                arr = np.frombuffer(data, dtype=dt, count=nbytes // np.dtype(dt).itemsize, offset=start)
                tensors[name] = arr.reshape(tuple(reversed(ne))).astype(np.float32)
            elif gtype == GGML_TYPE_BF16:
                arr = np.frombuffer(data, dtype="<u2", count=nbytes // 2, offset=start)
                tensors[name] = (arr.astype(np.uint32) << 16).view(np.float32).reshape(tuple(reversed(ne)))
            else:
                raw = np.frombuffer(data, dtype=np.uint8, count=nbytes, offset=start)
                tensors[name] = raw.reshape(tuple(reversed(ne[1:])) + (nbytes // max(1, _rows(ne)),))
            info[name] = (ne, gtype, start)
    return meta, tensors, info
