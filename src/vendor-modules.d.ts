/**
 * Types of the two decoders that ship none (issue 55): only what cutout calls. Internal: no public
 * type refers to them, so none reaches dist/*.d.ts.
 */
declare module 'heic-decode' {
  interface DecodedHeic {
    width: number;
    height: number;
    /** RGBA, 8 bits a channel, row after row. */
    data: Uint8ClampedArray;
  }
  function decode(input: { buffer: Uint8Array | ArrayBuffer }): Promise<DecodedHeic>;
  export default decode;
}

declare module 'upng-js' {
  interface ApngFrame {
    rect: { x: number; y: number; width: number; height: number };
    /** Milliseconds this frame shows. */
    delay: number;
    dispose: number;
    blend: number;
  }
  interface DecodedPng {
    width: number;
    height: number;
    frames: ApngFrame[];
    tabs: { acTL?: { num_frames: number; num_plays: number } };
  }
  export function decode(buffer: ArrayBuffer | Uint8Array): DecodedPng;
  /** Every frame composed onto the canvas (disposal and blending applied), RGBA. */
  export function toRGBA8(image: DecodedPng): ArrayBuffer[];
  /** An (A)PNG of RGBA frames; `cnum` 0: lossless; `delays` per frame in ms. */
  export function encode(frames: ArrayBuffer[], width: number, height: number, cnum: number, delays?: number[]): ArrayBuffer;
}
