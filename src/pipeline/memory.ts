/**
 * A full garbage collection before a large image. The decoded pixels, the matte and the encoded
 * result of a 50 MP image are several hundred MB of Buffers outside V8's heap, and V8 collects
 * them late: without this, the second large image in a process peaked beside the first one's
 * garbage (50 MP: 1366 MB after eight images, against 1140 MB with a collection before each).
 * The collection costs a few ms, against seconds of work per large image.
 */
import v8 from 'node:v8';
import vm from 'node:vm';

/** Images at least this large (output pixels) get a collection first. */
export const COLLECT_BEFORE_PIXELS = 16_000_000;

let gc: (() => void) | null | undefined;

/**
 * Runs a full collection. Node hides `gc` unless started with --expose-gc; the flag set at run
 * time exposes it in new contexts (as jest's leak detector does). Returns false where neither
 * works, and then does nothing.
 */
export function collectGarbage(): boolean {
  if (gc === undefined) {
    const global = globalThis as { gc?: () => void };
    gc = typeof global.gc === 'function' ? global.gc : null;
    if (gc === null) {
      try {
        v8.setFlagsFromString('--expose-gc');
        const fn: unknown = vm.runInNewContext('gc');
        gc = typeof fn === 'function' ? (fn as () => void) : null;
      } catch {
        gc = null;
      }
    }
  }
  gc?.();
  return gc !== null;
}
