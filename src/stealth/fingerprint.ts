/**
 * What a stealth session presents: a person's Google Chrome on Linux of the installed
 * Chromium's version. Pure, so every value is unit-tested (test/unit/stealth-fingerprint.test.ts).
 */

/** A brand of `navigator.userAgentData` / `Sec-CH-UA`. */
export interface Brand {
  brand: string;
  version: string;
}

/** CDP's `Emulation.UserAgentMetadata`. */
export interface UserAgentMetadata {
  brands: Brand[];
  fullVersionList: Brand[];
  fullVersion: string;
  platform: string;
  platformVersion: string;
  architecture: string;
  model: string;
  mobile: boolean;
  bitness: string;
  wow64: boolean;
}

export interface StealthFingerprint {
  /** The full Chromium version, e.g. 156.0.8078.79. */
  version: string;
  /** Regular Chrome's (reduced) user agent: minor versions zeroed, never HeadlessChrome. */
  userAgent: string;
  metadata: UserAgentMetadata;
  /** `--lang` and the first of navigator.languages. */
  locale: string;
  /** navigator.languages. */
  languages: string[];
  /** The Accept-Language header Chrome sends for `languages` (also the `--accept-lang` flag's list). */
  acceptLanguage: string;
}

/** `Chromium 156.0.8078.79 ` (chromium --version) or `HeadlessChrome/156.0.8078.79` (/json/version) -> 156.0.8078.79. */
export function parseChromiumVersion(text: string): string {
  const m = /(\d+)\.(\d+)\.(\d+)\.(\d+)/.exec(text);
  if (!m) throw new Error(`no Chromium version in ${JSON.stringify(text.slice(0, 100))}`);
  return m[0];
}

/**
 * The GREASE brand and the brands' order of Chrome `major`, as Chromium computes them
 * (components/embedder_support/user_agent_utils.cc, the updated GREASE algorithm seeded by
 * the major version): e.g. 131 gives "Google Chrome", "Chromium", "Not_A Brand";v=24.
 */
export function chromeBrands(major: number, full?: string): Brand[] {
  const chars = [' ', '(', ':', '-', '.', '/', ')', ';', '=', '?', '_'];
  const versions = ['8', '99', '24'];
  const grease = { brand: `Not${chars[major % chars.length]}A${chars[(major + 1) % chars.length]}Brand`, version: versions[major % versions.length]! };
  const v = full ?? String(major);
  const list: Brand[] = [
    { brand: grease.brand, version: full ? `${grease.version}.0.0.0` : grease.version },
    { brand: 'Chromium', version: v },
    { brand: 'Google Chrome', version: v },
  ];
  const orders = [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
  ];
  const order = orders[major % orders.length]!;
  const out: Brand[] = new Array<Brand>(3);
  order.forEach((pos, i) => (out[pos] = list[i]!));
  return out;
}

/** The `Sec-CH-UA` header value for brands. */
export function secChUa(brands: Brand[]): string {
  return brands.map((b) => `"${b.brand}";v="${b.version}"`).join(', ');
}

/** `en-US` + [`en-US`, `en`] -> `en-US,en;q=0.9` (Chrome's weighting). */
export function acceptLanguageOf(languages: string[]): string {
  return languages.map((l, i) => (i === 0 ? l : `${l};q=${Math.max(0.1, 1 - i / 10).toFixed(1)}`)).join(',');
}

export function stealthFingerprint(version: string, languages: string[] = ['en-US', 'en']): StealthFingerprint {
  const major = Number(version.split('.')[0]);
  const brands = chromeBrands(major);
  return {
    version,
    userAgent: `Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${major}.0.0.0 Safari/537.36`,
    metadata: {
      brands,
      fullVersionList: chromeBrands(major, version),
      fullVersion: version,
      platform: 'Linux',
      // What Chrome reports on Linux (the kernel version is not exposed).
      platformVersion: '',
      architecture: 'x86',
      model: '',
      mobile: false,
      bitness: '64',
      wow64: false,
    },
    locale: languages[0]!,
    languages,
    acceptLanguage: acceptLanguageOf(languages),
  };
}
