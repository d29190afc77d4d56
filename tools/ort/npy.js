'use strict';
// Minimal NumPy .npy reader/writer (format versions 1.0, 2.0 and 3.0 on read;
// 1.0, or 2.0 when the header does not fit, on write). C order, little-endian
// only. Dtype names are ONNX Runtime's tensor type names, so a parsed file can
// be handed to `new ort.Tensor(type, data, shape)` directly.

const fs = require('fs');

const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]); // \x93NUMPY

// descr kind+size -> ORT type, typed-array constructor, canonical descr.
const DTYPES = [
  { type: 'float32', descr: '<f4', kind: 'f', size: 4, Array: Float32Array },
  { type: 'float64', descr: '<f8', kind: 'f', size: 8, Array: Float64Array },
  { type: 'float16', descr: '<f2', kind: 'f', size: 2, Array: Uint16Array }, // raw bits
  { type: 'int64', descr: '<i8', kind: 'i', size: 8, Array: BigInt64Array },
  { type: 'int32', descr: '<i4', kind: 'i', size: 4, Array: Int32Array },
  { type: 'int16', descr: '<i2', kind: 'i', size: 2, Array: Int16Array },
  { type: 'int8', descr: '|i1', kind: 'i', size: 1, Array: Int8Array },
  { type: 'uint64', descr: '<u8', kind: 'u', size: 8, Array: BigUint64Array },
  { type: 'uint32', descr: '<u4', kind: 'u', size: 4, Array: Uint32Array },
  { type: 'uint16', descr: '<u2', kind: 'u', size: 2, Array: Uint16Array },
  { type: 'uint8', descr: '|u1', kind: 'u', size: 1, Array: Uint8Array },
  { type: 'bool', descr: '|b1', kind: 'b', size: 1, Array: Uint8Array },
];

class NpyError extends Error {}

function dtypeFromDescr(descr) {
  const m = /^([<>|=])([fiub])(\d+)$/.exec(descr);
  if (!m) throw new NpyError(`unsupported dtype '${descr}'`);
  const [, order, kind, sizeStr] = m;
  const size = Number(sizeStr);
  if (order === '>' && size > 1) throw new NpyError(`big-endian dtype '${descr}' not supported`);
  const d = DTYPES.find((t) => t.kind === kind && t.size === size);
  if (!d) throw new NpyError(`unsupported dtype '${descr}'`);
  return d;
}

function dtypeFromType(type) {
  const d = DTYPES.find((t) => t.type === type);
  if (!d) throw new NpyError(`unsupported dtype '${type}'`);
  return d;
}

// Parses the Python-literal header dict, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 224, 224), }
function parseHeader(text) {
  const descr = /['"]descr['"]\s*:\s*['"]([^'"]*)['"]/.exec(text);
  const fortran = /['"]fortran_order['"]\s*:\s*(True|False)/.exec(text);
  const shape = /['"]shape['"]\s*:\s*\(([^)]*)\)/.exec(text);
  if (!descr || !fortran || !shape) throw new NpyError('malformed header');
  if (fortran[1] === 'True') throw new NpyError('Fortran-order arrays not supported');
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  const dimsNum = dims.map((s) => {
    if (!/^\d+L?$/.test(s)) throw new NpyError(`bad shape entry '${s}'`);
    return Number.parseInt(s, 10);
  });
  return { descr: descr[1], shape: dimsNum };
}

// Parses a .npy buffer. Returns { type, descr, shape, data } where data is a
// freshly allocated (hence aligned) typed array.
function parse(buf) {
  if (buf.length < 10 || !buf.subarray(0, 6).equals(MAGIC)) throw new NpyError('not a .npy file (bad magic)');
  const major = buf[6];
  let headerLen;
  let offset;
  if (major === 1) {
    headerLen = buf.readUInt16LE(8);
    offset = 10;
  } else if (major === 2 || major === 3) {
    if (buf.length < 12) throw new NpyError('truncated header');
    headerLen = buf.readUInt32LE(8);
    offset = 12;
  } else {
    throw new NpyError(`unsupported .npy version ${major}.${buf[7]}`);
  }
  if (offset + headerLen > buf.length) throw new NpyError('truncated header');
  const header = parseHeader(buf.toString(major === 3 ? 'utf8' : 'latin1', offset, offset + headerLen));
  const dt = dtypeFromDescr(header.descr);
  const count = header.shape.reduce((a, b) => a * b, 1);
  const start = offset + headerLen;
  const nbytes = count * dt.size;
  if (buf.length - start < nbytes) {
    throw new NpyError(`truncated data: expected ${nbytes} bytes, found ${buf.length - start}`);
  }
  if (buf.length - start > nbytes) {
    throw new NpyError(`trailing data: expected ${nbytes} bytes, found ${buf.length - start}`);
  }
  const data = new dt.Array(count);
  new Uint8Array(data.buffer).set(buf.subarray(start, start + nbytes));
  return { type: dt.type, descr: dt.descr, shape: header.shape, data };
}

function read(file) {
  let buf;
  try {
    buf = fs.readFileSync(file);
  } catch (e) {
    throw new NpyError(e.code === 'ENOENT' ? 'no such file' : `cannot read: ${e.message}`);
  }
  return parse(buf);
}

// Serializes a typed array of ORT type `type` with `shape` into a .npy buffer.
function serialize(type, shape, data) {
  const dt = dtypeFromType(type);
  const count = shape.reduce((a, b) => a * b, 1);
  if (data.length !== count) {
    throw new NpyError(`data has ${data.length} elements, shape (${shape.join(', ')}) needs ${count}`);
  }
  const shapeStr = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let dict = `{'descr': '${dt.descr}', 'fortran_order': False, 'shape': ${shapeStr}, }`;
  // Pad with spaces so that magic + version + length + header (incl. '\n') is a
  // multiple of 64, as numpy does.
  let major = 1;
  let pre = 10;
  let total = pre + dict.length + 1;
  let pad = (64 - (total % 64)) % 64;
  if (dict.length + 1 + pad > 0xffff) {
    major = 2;
    pre = 12;
    total = pre + dict.length + 1;
    pad = (64 - (total % 64)) % 64;
  }
  dict = dict + ' '.repeat(pad) + '\n';
  const head = Buffer.alloc(pre);
  MAGIC.copy(head, 0);
  head[6] = major;
  head[7] = 0;
  if (major === 1) head.writeUInt16LE(dict.length, 8);
  else head.writeUInt32LE(dict.length, 8);
  let body;
  if (type === 'bool') {
    body = Buffer.alloc(count);
    for (let i = 0; i < count; i++) body[i] = data[i] ? 1 : 0;
  } else {
    body = Buffer.from(data.buffer, data.byteOffset, count * dt.size);
  }
  return Buffer.concat([head, Buffer.from(dict, 'latin1'), body]);
}

// Writes atomically: temporary name in the same folder, then rename.
function write(file, type, shape, data) {
  const buf = serialize(type, shape, data);
  const tmp = `${file}.tmp-${process.pid}`;
  try {
    fs.writeFileSync(tmp, buf);
    fs.renameSync(tmp, file);
  } catch (e) {
    try { fs.unlinkSync(tmp); } catch (_) { /* nothing to clean */ }
    throw new NpyError(`cannot write: ${e.message}`);
  }
}

module.exports = { parse, read, serialize, write, NpyError, DTYPES };
