// The protobuf wire encoding the ONNX graphs of the benchmarks are written in (bench/onnx.mjs,
// bench/onnx-bert.mjs): only what they use, field numbers from onnx/onnx.proto.

/** Protobuf wire encoding that keeps large payloads as typed-array chunks (a model is ~90 MB). */
export class Writer {
  constructor() { this.parts = []; this.length = 0; this.small = []; }
  flush() {
    if (this.small.length) { this.parts.push(Uint8Array.from(this.small)); this.small = []; }
  }
  push(b) { this.small.push(b); this.length++; }
  varint(v) {
    let n = BigInt.asUintN(64, BigInt(v));
    do {
      let b = Number(n & 0x7fn);
      n >>= 7n;
      if (n) b |= 0x80;
      this.push(b);
    } while (n);
    return this;
  }
  tag(field, wire) { return this.varint((field << 3) | wire); }
  int(field, v) { return this.tag(field, 0).varint(v); }
  float(field, v) {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.tag(field, 5);
    b.forEach((x) => this.push(x));
    return this;
  }
  raw(field, bytes) {
    this.tag(field, 2).varint(bytes.length);
    this.flush();
    this.parts.push(bytes);
    this.length += bytes.length;
    return this;
  }
  string(field, s) { return this.raw(field, new TextEncoder().encode(s)); }
  message(field, build) {
    const inner = new Writer();
    build(inner);
    inner.flush();
    this.tag(field, 2).varint(inner.length);
    this.flush();
    this.parts.push(...inner.parts);
    this.length += inner.length;
    return this;
  }
  bytes() {
    this.flush();
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const p of this.parts) { out.set(p, at); at += p.length; }
    return out;
  }
}
