/**
 * A ZIP archive of stored (uncompressed) entries: remove.bg's `format=zip` (`color.jpg` +
 * `alpha.png`, both already compressed, which is why remove.bg stores them). Written here rather
 * than taken from a dependency: the only zip library installed (adm-zip) comes with
 * onnxruntime-node's install script, not as ours, and a stored archive is three fixed headers.
 * APPNOTE.TXT 6.3, sections 4.3.7 (local header), 4.3.12 (central directory), 4.3.16 (end record).
 */
import { crc32 } from 'node:zlib';

export interface ZipEntry { name: string; data: Uint8Array }

/** MS-DOS date of 1980-01-01 (the format's epoch): entries carry no real time, so archives are reproducible. */
const DOS_DATE = (0 << 9) | (1 << 5) | 1;
const DOS_TIME = 0;
/** Version 1.0: enough for stored entries. */
const VERSION = 10;
/** Bit 11: the names are UTF-8. */
const UTF8_NAMES = 1 << 11;

/** The archive's bytes; at most 65535 entries of under 4 GB each (no ZIP64). */
export function storedZip(entries: readonly ZipEntry[]): Buffer {
  const parts: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const name = Buffer.from(entry.name, 'utf8');
    const crc = crc32(entry.data);
    const size = entry.data.length;
    if (size >= 0xffffffff || offset >= 0xffffffff) throw new RangeError('storedZip: entries of 4 GB and more need ZIP64');
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(VERSION, 4);
    local.writeUInt16LE(UTF8_NAMES, 6);
    local.writeUInt16LE(0, 8); // stored
    local.writeUInt16LE(DOS_TIME, 10);
    local.writeUInt16LE(DOS_DATE, 12);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(size, 18);
    local.writeUInt32LE(size, 22);
    local.writeUInt16LE(name.length, 26);
    local.writeUInt16LE(0, 28);
    const header = Buffer.alloc(46);
    header.writeUInt32LE(0x02014b50, 0);
    header.writeUInt16LE(VERSION, 4); // made by: MS-DOS, 1.0
    header.writeUInt16LE(VERSION, 6);
    header.writeUInt16LE(UTF8_NAMES, 8);
    header.writeUInt16LE(0, 10);
    header.writeUInt16LE(DOS_TIME, 12);
    header.writeUInt16LE(DOS_DATE, 14);
    header.writeUInt32LE(crc, 16);
    header.writeUInt32LE(size, 20);
    header.writeUInt32LE(size, 24);
    header.writeUInt16LE(name.length, 28);
    // extra length, comment length, disk number, internal and external attributes: 0
    header.writeUInt32LE(offset, 42);
    parts.push(local, name, Buffer.from(entry.data.buffer, entry.data.byteOffset, entry.data.byteLength));
    central.push(header, name);
    offset += 30 + name.length + size;
  }
  const directorySize = central.reduce((n, b) => n + b.length, 0);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directorySize, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...parts, ...central, end]);
}
