// protobufjs reads a Node Buffer with a reader that clamps a truncated string or bytes field to
// what is there instead of failing, so a cut-off message would decode "successfully" into wrong
// values. A plain Uint8Array view of the same memory gets the checking reader, which throws
// "index out of range". Every decode of bytes from another process goes through this.

export function checkedInput(bytes: Uint8Array): Uint8Array {
  return bytes.constructor === Uint8Array ? bytes : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
