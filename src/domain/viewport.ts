export interface ResolvedViewport {
  width: number;
  height: number;
  refresh_rate: number;
}

export const DEFAULT_VIEWPORT: ResolvedViewport = { width: 1920, height: 1080, refresh_rate: 25 };

/**
 * Refresh rate for a viewport given without one: higher resolutions get lower rates,
 * matching the contract's known-good presets (2560x1440@10, 1920x1080@25, 1440x900@25,
 * 1280x800@60 ...). Thresholds are on the pixel count.
 */
export function defaultRefreshRate(width: number, height: number): number {
  const pixels = width * height;
  if (pixels > 1920 * 1200) return 10;
  if (pixels >= 1440 * 900) return 25;
  return 60;
}

export function resolveViewport(v: { width: number; height: number; refresh_rate?: number } | undefined): ResolvedViewport {
  if (!v) return { ...DEFAULT_VIEWPORT };
  return { width: v.width, height: v.height, refresh_rate: v.refresh_rate ?? defaultRefreshRate(v.width, v.height) };
}
