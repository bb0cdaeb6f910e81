/**
 * A reader of ZIP archives for tests, written from the format (APPNOTE.TXT) rather than from
 * src/pipeline/zip.ts: it walks the end record and the central directory, then each local header,
 * and checks every stored entry's CRC-32, so a writer that lies anywhere fails here.
 */
import { crc32 } from 'node:zlib';

export interface ReadEntry { name: string; method: number; data: Buffer }

export function readZip(zip: Buffer): ReadEntry[] {
  const endAt = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (endAt < 0) throw new Error('no end of central directory record');
  const count = zip.readUInt16LE(endAt + 10);
  let at = zip.readUInt32LE(endAt + 16);
  const entries: ReadEntry[] = [];
  for (let i = 0; i < count; i++) {
    if (zip.readUInt32LE(at) !== 0x02014b50) throw new Error(`bad central header ${i}`);
    const method = zip.readUInt16LE(at + 10);
    const crc = zip.readUInt32LE(at + 16);
    const size = zip.readUInt32LE(at + 20);
    const nameLength = zip.readUInt16LE(at + 28);
    const extra = zip.readUInt16LE(at + 30);
    const comment = zip.readUInt16LE(at + 32);
    const localAt = zip.readUInt32LE(at + 42);
    const name = zip.subarray(at + 46, at + 46 + nameLength).toString('utf8');
    if (zip.readUInt32LE(localAt) !== 0x04034b50) throw new Error(`bad local header for ${name}`);
    const localName = zip.readUInt16LE(localAt + 26);
    const localExtra = zip.readUInt16LE(localAt + 28);
    const start = localAt + 30 + localName + localExtra;
    const data = zip.subarray(start, start + size);
    if (method === 0 && crc32(data) !== crc) throw new Error(`CRC mismatch for ${name}`);
    entries.push({ name, method, data });
    at += 46 + nameLength + extra + comment;
  }
  return entries;
}
