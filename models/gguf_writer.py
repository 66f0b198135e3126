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

Only F32 tensors (ggml type 0) are written; the reader also understands F16.
"""
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
        self.tensors = []   # (name, ne tuple, bytes)

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

    def add_tensor_f32(self, name, array):
        """array: a C-contiguous numpy float32 array in row-major order (shape
        (d_{n-1}, ..., d_0)); written with ne = reversed(shape)."""
        import numpy as np
        a = np.ascontiguousarray(array, dtype="<f4")
        if any(t[0] == name for t in self.tensors):
            raise ValueError("duplicate tensor " + name)
        self.tensors.append((name, tuple(reversed(a.shape)), a.tobytes()))

    def write(self):
        head = [b"GGUF", struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))]
        for key, v in self.kv:
            head.append(_pack_str(key))
            head.append(struct.pack("<I", v.vtype))
            head.append(_pack_value(v.vtype, v.value, v.elem))
        offset = 0
        for name, ne, data in self.tensors:
            head.append(_pack_str(name))
            head.append(struct.pack("<I", len(ne)))
            head.append(struct.pack("<%dQ" % len(ne), *ne))
            head.append(struct.pack("<IQ", GGML_TYPE_F32, offset))
            offset += len(data) + _pad(len(data))
        header = b"".join(head)
        with open(self.path, "wb") as f:
            f.write(header)
            f.write(b"\0" * _pad(len(header)))
            for _, _, data in self.tensors:
                f.write(data)
                f.write(b"\0" * _pad(len(data)))


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
        if vtype == T_STRING:
            return self.str()
        if vtype == T_ARRAY:
            elem, n = self.take("<IQ")
            if elem == T_STRING:
                return [self.str() for _ in range(n)]
            fmt = _SCALAR_FMT[elem]
            return list(self.take("<%d%s" % (n, fmt[1])))
        return self.take(_SCALAR_FMT[vtype])[0]


def read_gguf(path, load_tensors=True):
    """Parses a GGUF file. Returns (metadata dict, tensors dict name -> numpy array
    of shape reversed(ne)) (tensors are None when load_tensors is False), plus
    a third dict name -> (ne, ggml_type, absolute file offset)."""
    with open(path, "rb") as f:
        data = f.read()
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
        meta[key] = b.value(vt)
    info = {}
    for _ in range(n_t):
        name = b.str()
        (nd,) = b.take("<I")
        ne = b.take("<%dQ" % nd)
        gtype, off = b.take("<IQ")
        info[name] = (tuple(ne), gtype, off)
    align = meta.get("general.alignment", ALIGNMENT)
    base = b.o + _pad(b.o, align)
    tensors = None
    if load_tensors:
        import numpy as np
        tensors = {}
        for name, (ne, gtype, off) in info.items():
            if off % align:
                raise ValueError("tensor %s misaligned" % name)
            n = 1
            for x in ne:
                n *= x
            dt = {GGML_TYPE_F32: "<f4", GGML_TYPE_F16: "<f2"}[gtype]
            start = base + off
            arr = np.frombuffer(data, dtype=dt, count=n, offset=start)
            tensors[name] = arr.reshape(tuple(reversed(ne))).astype(np.float32)
            info[name] = (ne, gtype, start)
    return meta, tensors, info
