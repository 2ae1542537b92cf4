// Generates test/vectors/parquet/: split block Bloom filter (SBBF) bitsets
// written by a real Parquet writer, DuckDB (through @duckdb/node-api, pinned
// in package.json), over fixed, known value sets.
//
// For every vector NAME it writes, under test/vectors/parquet/:
//   NAME.values      the values in the filter, one per line, COPY text format
//   NAME.bitset.hex  the bitset exactly as DuckDB wrote it into the file, in
//                    lowercase hex on one line (the BloomFilterHeader is not
//                    part of it; see MANIFEST.tsv for the header bytes)
//   NAME.absent      1000 values of the same type NOT in the set, each with
//                    DuckDB's own answer, as "value<TAB>t|f" (t: the filter
//                    says "maybe present", i.e. a false positive)
// and MANIFEST.tsv with one line of geometry and provenance per vector.
// README.md in that directory is written by hand, not by this script.
//
// Usage (Node 20 was used):
//   cd tools/parquet-vectors && npm install && node make-vectors.js [--keep]
// --keep leaves the written .parquet files in the temporary directory and
// prints its path.  The output is deterministic: no clock and no unseeded
// randomness is used, so running it again must produce identical files.

import { DuckDBInstance } from '@duckdb/node-api';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const OUT = path.resolve(HERE, '../../test/vectors/parquet');
const KEEP = process.argv.includes('--keep');
const REPEAT = 16; // each value is written REPEAT times so that DuckDB picks
                   // dictionary encoding, which is when it writes a Bloom filter
const N_ABSENT = 1000;

// ---------------------------------------------------------------- PRNG
// splitmix64, fixed seeds: deterministic across runs and machines.
function prng(seed) {
  let s = BigInt.asUintN(64, BigInt(seed));
  return () => {
    s = BigInt.asUintN(64, s + 0x9e3779b97f4a7c15n);
    let z = s;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
    return z ^ (z >> 31n);
  };
}

// ---------------------------------------------------------------- text forms
// PostgreSQL COPY text format: backslash, tab, newline and carriage return are
// escaped; everything else (UTF-8 included) is written as is.
function copyEscape(s) {
  return s.replace(/[\\\t\n\r]/g, (c) => ({ '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' })[c]);
}
function sqlString(s) {
  return "'" + s.replace(/'/g, "''") + "'";
}
// Shortest decimal that reads back (strtod / float8in) as the same double.
function float8Text(x) {
  if (Object.is(x, -0) || Number.isNaN(x)) throw new Error('-0 and NaN are not used');
  return String(x); // ECMAScript Number::toString: shortest round trip; "Infinity", "1e+308"
}
// Shortest decimal that reads back (strtof / float4in) as the same float.
function float4Text(x) {
  if (x !== Math.fround(x)) throw new Error(`${x} is not a float32`);
  if (Object.is(x, -0) || Number.isNaN(x)) throw new Error('-0 and NaN are not used');
  if (!Number.isFinite(x)) return String(x);
  for (let p = 1; p <= 9; p++) {
    const s = String(Number(x.toPrecision(p)));
    if (Math.fround(Number(s)) === x) return s;
  }
  throw new Error(`no round-trip text for float ${x}`);
}
function f32bits(x) {
  const b = Buffer.alloc(4); b.writeFloatLE(x); return b.readUInt32LE();
}
function f64bits(x) {
  const b = Buffer.alloc(8); b.writeDoubleLE(x); return b.readBigUInt64LE();
}
function uuidText(bytes) {
  const h = Buffer.from(bytes).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

// ---------------------------------------------------------------- types
// For each kind: the DuckDB type written, the Parquet physical type DuckDB
// maps it to, the text form, a key for set membership, the SQL literal.
const KINDS = {
  int4: {
    duck: 'INTEGER', physical: 'INT32', logical: '-',
    text: (v) => String(v), key: (v) => String(v), lit: (v) => `CAST(${v} AS INTEGER)`,
    plain: (v) => { const b = Buffer.alloc(4); b.writeInt32LE(v); return b; },
  },
  int8: {
    duck: 'BIGINT', physical: 'INT64', logical: '-',
    text: (v) => v.toString(), key: (v) => v.toString(), lit: (v) => `CAST(${v} AS BIGINT)`,
    plain: (v) => { const b = Buffer.alloc(8); b.writeBigInt64LE(v); return b; },
  },
  float4: {
    duck: 'FLOAT', physical: 'FLOAT', logical: '-',
    text: float4Text, key: (v) => String(f32bits(v)), lit: (v) => `CAST('${float4Text(v)}' AS FLOAT)`,
    plain: (v) => { const b = Buffer.alloc(4); b.writeFloatLE(v); return b; },
  },
  float8: {
    duck: 'DOUBLE', physical: 'DOUBLE', logical: '-',
    text: float8Text, key: (v) => String(f64bits(v)), lit: (v) => `CAST('${float8Text(v)}' AS DOUBLE)`,
    plain: (v) => { const b = Buffer.alloc(8); b.writeDoubleLE(v); return b; },
  },
  text: {
    duck: 'VARCHAR', physical: 'BYTE_ARRAY', logical: 'STRING (UTF8)',
    text: copyEscape, key: (v) => v, lit: sqlString,
    plain: (v) => Buffer.from(v, 'utf8'),
  },
  uuid: {
    duck: 'UUID', physical: 'FIXED_LEN_BYTE_ARRAY(16)', logical: 'UUID',
    text: (v) => v, key: (v) => v, lit: (v) => `CAST('${v}' AS UUID)`,
    plain: (v) => Buffer.from(v.replace(/-/g, ''), 'hex'),
  },
};

// ---------------------------------------------------------------- value sets
function uniq(kind, values) {
  const seen = new Set();
  const out = [];
  for (const v of values) {
    const k = KINDS[kind].key(v);
    if (!seen.has(k)) { seen.add(k); out.push(v); }
  }
  return out;
}
const range = (a, b) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

function int4Values() {
  return uniq('int4', [
    ...range(0, 999),
    -1, -2, -3, -7, -42, -100, -999, -1000, -65536, -123456789,
    65535, 65536, 16777216, 123456789, 1073741824,
    2147483647, 2147483646, -2147483647, -2147483648,
  ]);
}
function int8Values() {
  const P = (e) => 2n ** BigInt(e);
  return uniq('int8', [
    ...range(0, 999).map(BigInt),
    -1n, -1000n, P(31) - 1n, P(31), -P(31), -P(31) - 1n, P(32) - 1n, P(32), P(32) + 1n, -P(32),
    P(53), P(53) + 1n, -P(53), 10n ** 15n, -(10n ** 15n), 10n ** 18n, 123456789012345678n,
    P(63) - 1n, P(63) - 2n, -P(63), -P(63) + 1n,
  ]);
}
function float8Values() {
  return uniq('float8', [
    ...range(-100, 899).map((k) => k / 10),
    1 / 3, 2 / 3, Math.PI, -Math.PI, Math.E, 0.1 + 0.2, 123456.789, 1e21, 1e100, 1e-300,
    2 ** 53, 2 ** 53 + 2, -(2 ** 53),
    1e308, -1e308, Number.MAX_VALUE, -Number.MAX_VALUE,
    Number.MIN_VALUE, -Number.MIN_VALUE, 2.2250738585072014e-308,
    Infinity, -Infinity,
  ]);
}
function float4Values() {
  const F = Math.fround;
  return uniq('float4', [
    ...range(-100, 899).map((k) => F(k / 10)),
    F(1 / 3), F(Math.PI), F(-Math.PI), F(Math.E), F(123456.789), F(1e30), F(1e-30),
    16777216, 16777218, -16777218,
    F(3.4028234663852886e38), -F(3.4028234663852886e38),
    F(1.401298464324817e-45), -F(1.401298464324817e-45), F(1.1754943508222875e-38),
    Infinity, -Infinity,
  ]);
}
function textValues() {
  const special = [
    '', 'a', 'A', 'ab', 'abc', 'abcd', 'hello', 'Hello, World!', ' ', '  leading', 'trailing  ',
    'é', 'naïve café', 'Ωmega', 'ß', 'İstanbul', '日本語', '中文字符', 'Привет, мир', 'עברית',
    'العربية', 'ελληνικά', '🎉', 'emoji 🎉🚀', '👩‍💻', 'e\u0301' /* NFD é */, '\u00a0nbsp',
    'tab\there', 'line1\nline2', 'cr\rlf', 'back\\slash', '\\N', '\\.', '\\', 'C:\\path\\to',
    "it's", '"quoted"', 'semi;colon', 'comma,separated', 'NULL', 'null', '0', '-1', '1e10',
    'ü'.repeat(20), '€'.repeat(11), 'y'.repeat(300),
  ];
  const xs = range(1, 40).map((n) => 'x'.repeat(n)); // all XXH64 tail lengths, 1..40 bytes
  const out = uniq('text', [...special, ...xs]);
  for (let i = 0; out.length < 200; i++) out.push(`str-${i}`);
  return uniq('text', out);
}
function uuidValues() {
  const next = prng(0x757569642d736574n);
  const special = [
    '00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff',
    '80000000-0000-0000-0000-000000000000', '7fffffff-ffff-ffff-ffff-ffffffffffff',
    '00000000-0000-0000-0000-000000000001', '01234567-89ab-cdef-0123-456789abcdef',
  ];
  const out = [...special];
  while (out.length < 1006) out.push(randomUuid(next));
  return uniq('uuid', out);
}
function randomUuid(next) {
  const b = Buffer.alloc(16);
  b.writeBigUInt64BE(next(), 0);
  b.writeBigUInt64BE(next(), 8);
  b[6] = (b[6] & 0x0f) | 0x40; // version 4
  b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
  return uuidText(b);
}

// ---------------------------------------------------------------- absent sets
function absent(kind, present, gen) {
  const have = new Set(present.map(KINDS[kind].key));
  const out = [];
  const seen = new Set();
  for (const v of gen()) {
    const k = KINDS[kind].key(v);
    if (have.has(k) || seen.has(k)) continue;
    seen.add(k);
    out.push(v);
    if (out.length === N_ABSENT) return out;
  }
  throw new Error(`not enough absent ${kind} values`);
}
function* int4Absent(seed) {
  yield* range(1000, 1299); yield* range(-1300, -1001);
  const next = prng(seed);
  for (;;) yield Number(BigInt.asIntN(32, next()));
}
function* int8Absent(seed) {
  yield* range(1000, 1299).map(BigInt); yield* range(-1300, -1001).map(BigInt);
  const next = prng(seed);
  for (;;) yield BigInt.asIntN(64, next());
}
function* float8Absent(seed) {
  yield* range(0, 399).map((k) => (k + 0.5) / 10);
  yield* range(900, 1199).map((k) => k / 10);
  const next = prng(seed);
  const b = Buffer.alloc(8);
  for (;;) {
    b.writeBigUInt64LE(next());
    const x = b.readDoubleLE();
    if (Number.isFinite(x) && x !== 0) yield x;
  }
}
function* float4Absent(seed) {
  yield* range(0, 399).map((k) => Math.fround((k + 0.5) / 10));
  yield* range(900, 1199).map((k) => Math.fround(k / 10));
  const next = prng(seed);
  const b = Buffer.alloc(4);
  for (;;) {
    b.writeUInt32LE(Number(next() & 0xffffffffn));
    const x = b.readFloatLE();
    if (Number.isFinite(x) && x !== 0) yield x;
  }
}
function* textAbsent(seed) {
  yield* ['B', 'Abc', 'E\u0301', 'e', 'hello ', 'Hello', '\t', '\n', '\\n',
    'x'.repeat(41), 'y'.repeat(299), 'y'.repeat(301), '🎊', '日本', 'NUL', 'N'];
  for (let i = 0; i < 500; i++) yield `absent-${i}`;
  for (let i = 0; i < 200; i++) yield `nïçht-da-${i}-日本`;
  for (let i = 42; i < 142; i++) yield 'x'.repeat(i);
  const next = prng(seed);
  const alphabet = [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_.,;:!?äöüßéèñ€日本語🎉\t\\'];
  for (;;) {
    const len = 1 + Number(next() % 50n);
    let s = '';
    for (let j = 0; j < len; j++) s += alphabet[Number(next() % BigInt(alphabet.length))];
    yield s;
  }
}
function* uuidAbsent(seed) {
  yield* ['00000000-0000-0000-0000-000000000002', 'ffffffff-ffff-ffff-ffff-fffffffffffe',
    '80000000-0000-0000-0000-000000000001', '7fffffff-ffff-ffff-ffff-fffffffffffe'];
  const next = prng(seed);
  for (;;) yield randomUuid(next);
}

// ---------------------------------------------------------------- XXH64, SBBF
// Used to cross-check DuckDB, and for the one case its reader cannot answer
// (UUID probes, see below).  XXH64 per the xxHash spec 0.1.1, seed 0.
const M64 = (1n << 64n) - 1n;
const P1 = 0x9e3779b185ebca87n, P2 = 0xc2b2ae3d27d4eb4fn, P3 = 0x165667b19e3779f9n;
const P4 = 0x85ebca77c2b2ae63n, P5 = 0x27d4eb2f165667c5n;
const rotl = (x, r) => ((x << BigInt(r)) | (x >> BigInt(64 - r))) & M64;
const xround = (acc, lane) => (rotl((acc + lane * P2) & M64, 31) * P1) & M64;
const xmerge = (acc, v) => ((((acc ^ xround(0n, v)) * P1) & M64) + P4) & M64;
function xxh64(buf) {
  const len = buf.length;
  let p = 0, acc;
  if (len >= 32) {
    let v1 = (P1 + P2) & M64, v2 = P2, v3 = 0n, v4 = (-P1) & M64;
    for (; p + 32 <= len; p += 32) {
      v1 = xround(v1, buf.readBigUInt64LE(p)); v2 = xround(v2, buf.readBigUInt64LE(p + 8));
      v3 = xround(v3, buf.readBigUInt64LE(p + 16)); v4 = xround(v4, buf.readBigUInt64LE(p + 24));
    }
    acc = (rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)) & M64;
    acc = xmerge(xmerge(xmerge(xmerge(acc, v1), v2), v3), v4);
  } else {
    acc = P5;
  }
  acc = (acc + BigInt(len)) & M64;
  for (; p + 8 <= len; p += 8) acc = (rotl(acc ^ xround(0n, buf.readBigUInt64LE(p)), 27) * P1 + P4) & M64;
  if (p + 4 <= len) { acc = (rotl(acc ^ ((BigInt(buf.readUInt32LE(p)) * P1) & M64), 23) * P2 + P3) & M64; p += 4; }
  for (; p < len; p++) acc = (rotl(acc ^ ((BigInt(buf[p]) * P5) & M64), 11) * P1) & M64;
  acc = ((acc ^ (acc >> 33n)) * P2) & M64;
  acc = ((acc ^ (acc >> 29n)) * P3) & M64;
  return acc ^ (acc >> 32n);
}
for (const [s, h] of [['', 0xef46db3751d8e999n], ['a', 0xd24ec4f1a98c6e5bn], ['abc', 0x44bc2cf5ad770999n]])
  if (xxh64(Buffer.from(s)) !== h) throw new Error('xxh64 self-test failed');
const SALT = [0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d, 0x705495c7, 0x2df1424b, 0x9efc4947, 0x5c6bfb31];
function sbbfSlot(bitset, h) {
  const z = BigInt(bitset.length / 32);
  const block = Number(((h >> 32n) * z) >> 32n);
  const key = Number(h & 0xffffffffn);
  return SALT.map((s, i) => [block * 32 + i * 4, 1 << (Math.imul(key, s) >>> 27)]);
}
const sbbfInsert = (bitset, h) => {
  for (const [off, bit] of sbbfSlot(bitset, h)) bitset.writeUInt32LE((bitset.readUInt32LE(off) | bit) >>> 0, off);
};
const sbbfCheck = (bitset, h) => sbbfSlot(bitset, h).every(([off, bit]) => ((bitset.readUInt32LE(off) & bit) >>> 0) !== 0);

// ---------------------------------------------------------------- vectors
// bytes: the bitset size wanted; DuckDB has no option for it, so the false
// positive ratio option is derived from it (see fprFor) and the size actually
// written is checked against it.
const VECTORS = [
  { name: 'int4', kind: 'int4', bytes: 1024, values: int4Values, absent: int4Absent },
  { name: 'int4_32b', kind: 'int4', bytes: 32, values: () => range(-3, 16), absent: int4Absent },
  { name: 'int8', kind: 'int8', bytes: 1024, values: int8Values, absent: int8Absent },
  { name: 'int8_8k', kind: 'int8', bytes: 8192, values: int8Values, absent: int8Absent },
  { name: 'int8_32b_saturated', kind: 'int8', bytes: 32, values: () => range(0, 99).map(BigInt), absent: int8Absent },
  { name: 'float4', kind: 'float4', bytes: 1024, values: float4Values, absent: float4Absent },
  { name: 'float8', kind: 'float8', bytes: 1024, values: float8Values, absent: float8Absent },
  { name: 'text', kind: 'text', bytes: 1024, values: textValues, absent: textAbsent },
  { name: 'text_128b', kind: 'text', bytes: 128, values: textValues, absent: textAbsent },
  { name: 'text_32b', kind: 'text', bytes: 32, values: () => textValues().slice(0, 12), absent: textAbsent },
  { name: 'uuid', kind: 'uuid', bytes: 1024, values: uuidValues, absent: uuidAbsent },
];

// DuckDB (ParquetBloomFilter ctor): m = -8 n / ln(1 - f^(1/8)) bits;
// blocks = max(NextPowerOfTwo(floor(m / 8)) / 32, 1).  Aim m/8 at 3/4 of the
// wanted size, well inside (bytes/2, bytes], so rounding cannot move it.
function fprFor(n, bytes) {
  const x = 1 - Math.exp(-n / (0.75 * bytes));
  return Number((x ** 8).toPrecision(6));
}

// ---------------------------------------------------------------- thrift
// Minimal Thrift compact protocol reader, enough for BloomFilterHeader.
function readThriftStruct(buf, pos) {
  const fields = {};
  let last = 0;
  const varint = () => {
    let r = 0n, shift = 0n;
    for (;;) {
      const b = buf[pos++];
      r |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return r;
      shift += 7n;
    }
  };
  const zigzag = (v) => (v >> 1n) ^ -(v & 1n);
  for (;;) {
    const h = buf[pos++];
    if (h === 0) return { fields, pos };
    const type = h & 0x0f;
    const delta = h >> 4;
    const id = delta ? last + delta : Number(zigzag(varint()));
    last = id;
    switch (type) {
      case 1: fields[id] = true; break;
      case 2: fields[id] = false; break;
      case 3: fields[id] = buf[pos++]; break;
      case 4: case 5: case 6: fields[id] = zigzag(varint()); break;
      case 12: { const r = readThriftStruct(buf, pos); fields[id] = r.fields; pos = r.pos; break; }
      default: throw new Error(`unexpected thrift type ${type} in BloomFilterHeader`);
    }
  }
}

// ---------------------------------------------------------------- main
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'parquet-vectors-'));
const db = await DuckDBInstance.create(':memory:');
const con = await db.connect();
await con.run('SET threads = 1');
const rows = async (sql) => (await con.runAndReadAll(sql)).getRowObjects();
const one = async (sql) => (await rows(sql))[0];

const version = (await one('SELECT version() AS v')).v;
fs.mkdirSync(OUT, { recursive: true });
const manifest = [[
  'name', 'pg_type', 'parquet_physical_type', 'parquet_logical_type', 'n_values', 'num_bytes', 'n_blocks',
  'n_absent', 'n_absent_maybe', 'absent_answered_by', 'duckdb_fpr_option', 'rows_per_value', 'header_hex', 'bitset_sha256',
].join('\t')];

for (const vec of VECTORS) {
  const K = KINDS[vec.kind];
  const values = vec.values();
  const absentValues = absent(vec.kind, values, () => vec.absent(0x5eed0000 + values.length));
  const n = values.length;
  const fpr = fprFor(n, vec.bytes);
  const file = path.join(tmp, `${vec.name}.parquet`);

  // Load the values through their literals, then check DuckDB holds exactly them.
  await con.run('DROP TABLE IF EXISTS src');
  await con.run(`CREATE TABLE src (i INTEGER, v ${K.duck})`);
  for (let i = 0; i < n; i += 200) {
    const chunk = values.slice(i, i + 200).map((v, j) => `(${i + j}, ${K.lit(v)})`);
    await con.run(`INSERT INTO src VALUES ${chunk.join(', ')}`);
  }
  const back = await rows(`SELECT i, v::VARCHAR AS s, ${vec.kind.startsWith('float') ? 'v::DOUBLE' : 'v'} AS v FROM src ORDER BY i`);
  back.forEach((r, i) => {
    const want = values[i];
    let ok;
    if (vec.kind === 'float4' || vec.kind === 'float8') ok = Object.is(r.v, want);
    else if (vec.kind === 'uuid') ok = r.s === want;
    else ok = r.v === want;
    if (!ok) throw new Error(`${vec.name}: DuckDB holds ${r.s} for value #${i} ${K.text(want)}`);
  });

  // Write it: every value REPEAT times, in one row group.
  await con.run(`COPY (SELECT v FROM src, range(${REPEAT}) r(x) ORDER BY x, i) TO '${file}' (FORMAT parquet,
      ROW_GROUP_SIZE 10000000, DICTIONARY_SIZE_LIMIT 10000000, BLOOM_FILTER_FALSE_POSITIVE_RATIO ${fpr})`);

  // Find the filter through the footer (DuckDB's parquet_metadata) and read
  // its Thrift BloomFilterHeader and bitset straight from the file bytes.
  const meta = await rows(`SELECT row_group_id, type, encodings, bloom_filter_offset AS off,
      bloom_filter_length AS len FROM parquet_metadata('${file}')`);
  if (meta.length !== 1) throw new Error(`${vec.name}: expected one row group of one column`);
  const m = meta[0];
  if (m.off === null) throw new Error(`${vec.name}: no Bloom filter written (encodings ${m.encodings})`);
  const buf = fs.readFileSync(file);
  const off = Number(m.off);
  const { fields, pos } = readThriftStruct(buf, off);
  const numBytes = Number(fields[1]);
  if (!(fields[2] && fields[2][1]) || !(fields[3] && fields[3][1]) || !(fields[4] && fields[4][1]))
    throw new Error(`${vec.name}: header is not BLOCK / XXHASH / UNCOMPRESSED`);
  if (pos - off + numBytes !== Number(m.len)) throw new Error(`${vec.name}: bloom_filter_length mismatch`);
  const header = buf.subarray(off, pos);
  const bitset = buf.subarray(pos, pos + numBytes);
  if (bitset.length !== vec.bytes) throw new Error(`${vec.name}: DuckDB wrote ${bitset.length} bytes, wanted ${vec.bytes}`);
  const expectType = K.physical.replace(/\(.*/, '');
  if (m.type !== expectType) throw new Error(`${vec.name}: physical type ${m.type}, expected ${expectType}`);

  // The file must read back as exactly the set.
  const diff = await one(`SELECT (SELECT count(*) FROM (SELECT v FROM read_parquet('${file}') EXCEPT SELECT v FROM src))
      + (SELECT count(*) FROM (SELECT v FROM src EXCEPT SELECT v FROM read_parquet('${file}'))) AS d`);
  if (diff.d !== 0n) throw new Error(`${vec.name}: file does not read back as the value set`);

  // Cross-check: the spec algorithm over the PLAIN bytes must rebuild
  // DuckDB's bitset byte for byte.
  const rebuilt = Buffer.alloc(bitset.length);
  for (const v of values) sbbfInsert(rebuilt, xxh64(K.plain(v)));
  if (!rebuilt.equals(bitset)) throw new Error(`${vec.name}: spec rebuild differs from DuckDB's bitset`);

  // DuckDB's own reader (parquet_bloom_probe: the Bloom filter only, no
  // min/max statistics).  DuckDB 1.5.6 answers "not excluded" for any UUID
  // probe (it does not hash UUID constants), so for UUIDs the answers are
  // filter_check on DuckDB's bitset computed here, which agrees with DuckDB's
  // probe on every other vector.
  const duckProbe = async (v) => {
    const r = await rows(`SELECT bloom_filter_excludes AS e FROM parquet_bloom_probe('${file}', 'v', ${K.lit(v)})`);
    if (r.length !== 1) throw new Error('expected one row group');
    return !r[0].e; // true: "maybe present"
  };
  const byDuck = vec.kind !== 'uuid';
  for (const v of values) {
    if (!sbbfCheck(bitset, xxh64(K.plain(v)))) throw new Error(`${vec.name}: present value ${K.text(v)} not in bitset`);
    if (byDuck && !(await duckProbe(v))) throw new Error(`${vec.name}: DuckDB excludes present value ${K.text(v)}`);
  }
  const answers = [];
  for (const v of absentValues) {
    const mine = sbbfCheck(bitset, xxh64(K.plain(v)));
    if (byDuck) {
      const duck = await duckProbe(v);
      if (duck !== mine) throw new Error(`${vec.name}: DuckDB answers ${duck} for ${K.text(v)}, spec check ${mine}`);
    }
    answers.push(mine);
  }

  // Write the vector files.
  const lines = (a) => a.join('\n') + '\n';
  fs.writeFileSync(path.join(OUT, `${vec.name}.values`), lines(values.map(K.text)));
  fs.writeFileSync(path.join(OUT, `${vec.name}.bitset.hex`), bitset.toString('hex') + '\n');
  fs.writeFileSync(path.join(OUT, `${vec.name}.absent`),
    lines(absentValues.map((v, i) => `${K.text(v)}\t${answers[i] ? 't' : 'f'}`)));
  const maybe = answers.filter(Boolean).length;
  manifest.push([
    vec.name, vec.kind, K.physical, K.logical, n, bitset.length, bitset.length / 32,
    absentValues.length, maybe, byDuck ? 'duckdb' : 'spec-check', fpr, REPEAT, header.toString('hex'),
    createHash('sha256').update(bitset).digest('hex'),
  ].join('\t'));
  console.log(`${vec.name}: ${n} values, ${bitset.length} bytes, ${maybe}/${absentValues.length} absent values answered maybe`);
}

const createdBy = (await one(`SELECT created_by FROM parquet_file_metadata('${path.join(tmp, 'int4.parquet')}')`)).created_by;
fs.writeFileSync(path.join(OUT, 'MANIFEST.tsv'),
  `# writer: created_by '${createdBy}' (DuckDB ${version} via npm @duckdb/node-api 1.5.6-r.1)\n` + manifest.join('\n') + '\n');
console.log(`writer: ${createdBy}`);
if (KEEP) console.log(`parquet files kept in ${tmp}`);
else fs.rmSync(tmp, { recursive: true, force: true });
