/**
 * Photoroom's sizes, shared by its two doors (`/v1/segment`'s `size`, and the test-key preview of
 * both it and `/v2/edit`): the cutout size each is priced as, and the output's largest area.
 */
export const PHOTOROOM_SIZES: Readonly<Record<string, { size: 'preview' | 'full'; maxArea: number }>> = Object.freeze({
  preview: { size: 'preview', maxArea: 250_000 },
  medium: { size: 'full', maxArea: 1_500_000 },
  hd: { size: 'full', maxArea: 4_000_000 },
  full: { size: 'full', maxArea: 36_000_000 },
});
