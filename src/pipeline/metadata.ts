/**
 * `keep_metadata` (docs/product-photos.md): the input's EXIF, XMP and colour profile carried into
 * the output. The pixels are oriented and converted to sRGB on the way in, so EXIF's orientation
 * is set to 1 (upright); an RGB profile of the input (Display P3, Adobe RGB) is kept by converting
 * the output's pixels back into it, so that the profile describes them; a CMYK or grey profile
 * cannot describe an RGB output, which is then tagged sRGB. EXIF goes into JPEG (an APP1 segment)
 * and PNG (an eXIf chunk); XMP and the profile through sharp into each format it writes them to.
 */

export interface KeptMetadata {
  /** The TIFF structure of the input's EXIF (without the `Exif\0\0` header), orientation reset. */
  exif?: Buffer;
  xmp?: string;
  /** The input's ICC profile when it is an RGB one (its header's colour space `RGB `). */
  icc?: Buffer;
}

const EXIF_HEADER = Buffer.from('Exif\0\0', 'binary');

/** The TIFF bytes of an EXIF block (sharp's `metadata().exif`, with or without `Exif\0\0`), its orientation set to 1; undefined when unreadable. */
export function exifForOutput(exif: Buffer | undefined): Buffer | undefined {
  if (!exif || exif.length < 8) return undefined;
  const tiff = Buffer.from(exif.subarray(0, 6).equals(EXIF_HEADER) ? exif.subarray(6) : exif);
  const order = tiff.toString('latin1', 0, 2);
  if (order !== 'II' && order !== 'MM') return undefined;
  const le = order === 'II';
  const u16 = (o: number) => (le ? tiff.readUInt16LE(o) : tiff.readUInt16BE(o));
  const u32 = (o: number) => (le ? tiff.readUInt32LE(o) : tiff.readUInt32BE(o));
  if (u16(2) !== 42) return undefined;
  const ifd = u32(4);
  if (ifd + 2 > tiff.length) return undefined;
  const entries = u16(ifd);
  for (let e = 0; e < entries; e++) {
    const at = ifd + 2 + e * 12;
    if (at + 12 > tiff.length) return undefined;
    // Orientation (0x0112), a SHORT: its value sits in the entry's first two value bytes.
    if (u16(at) === 0x0112) {
      if (le) tiff.writeUInt16LE(1, at + 8);
      else tiff.writeUInt16BE(1, at + 8);
    }
  }
  return tiff;
}

/** `jpeg` with an EXIF APP1 segment after its SOI (and JFIF APP0, if any). */
export function jpegWithExif(jpeg: Buffer, tiff: Buffer): Buffer {
  const body = Buffer.concat([EXIF_HEADER, tiff]);
  if (body.length + 2 > 0xffff) return jpeg;
  const segment = Buffer.alloc(4);
  segment.writeUInt16BE(0xffe1, 0);
  segment.writeUInt16BE(body.length + 2, 2);
  let at = 2;
  if (jpeg[2] === 0xff && jpeg[3] === 0xe0) at = 4 + jpeg.readUInt16BE(4);
  return Buffer.concat([jpeg.subarray(0, at), segment, body, jpeg.subarray(at)]);
}

const CRC_TABLE = (() => {
  const t = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c;
  }
  return t;
})();

function crc32(b: Buffer): number {
  let c = -1;
  for (let i = 0; i < b.length; i++) c = CRC_TABLE[(c ^ b[i]) & 0xff] ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}

/** `png` with an eXIf chunk before its first IDAT. */
export function pngWithExif(png: Buffer, tiff: Buffer): Buffer {
  let at = 8;
  while (at + 8 <= png.length) {
    const len = png.readUInt32BE(at);
    if (png.toString('latin1', at + 4, at + 8) === 'IDAT') break;
    at += 12 + len;
  }
  if (at + 8 > png.length) return png;
  const type = Buffer.from('eXIf', 'latin1');
  const head = Buffer.alloc(4);
  head.writeUInt32BE(tiff.length, 0);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([type, tiff])), 0);
  return Buffer.concat([png.subarray(0, at), head, type, tiff, crc, png.subarray(at)]);
}


/** The profile when it describes RGB pixels (ICC header: colour space at bytes 16-19), else undefined. */
export function rgbProfile(icc: Buffer | undefined): Buffer | undefined {
  return icc && icc.length >= 128 && icc.toString('latin1', 16, 20) === 'RGB ' ? icc : undefined;
}
