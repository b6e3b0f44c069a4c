export interface ChromiumLaunchOptions {
  userDataDir: string;
  headless: boolean;
  kioskMode: boolean;
  width: number;
  height: number;
  startUrl: string | null;
  /** Unpacked extension directories to load (and the only extensions allowed). */
  extensionDirs?: string[];
  /** Chromium's proxy (browserd's local egress bridge) and its bypass list. */
  proxy?: { server: string; bypassList: string } | null;
  /** Stealth mode (docs/stealth.md): regular Chrome's user agent and languages, no automation flag, WebGL everywhere. */
  stealth?: { userAgent: string; locale: string; acceptLanguages: string[] } | null;
}

/**
 * Command-line flags for one session's Chromium. Pure, so the flag set is testable.
 * The first five after the debugging ones are required on this machine's closed network.
 */
export function chromiumArgs(o: ChromiumLaunchOptions): string[] {
  const args = [
    '--remote-debugging-port=0',
    '--remote-debugging-address=127.0.0.1',
    `--user-data-dir=${o.userDataDir}`,
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--disable-quic',
    '--no-default-browser-check',
    '--password-store=basic',
    '--use-mock-keychain',
    '--disable-breakpad',
    '--disable-crash-reporter',
    '--disable-domain-reliability',
    '--metrics-recording-only',
    `--window-size=${o.width},${o.height}`,
    '--window-position=0,0',
  ];
  if (o.extensionDirs?.length) {
    const dirs = o.extensionDirs.join(',');
    args.push(`--load-extension=${dirs}`, `--disable-extensions-except=${dirs}`);
  }
  if (o.proxy) args.push(`--proxy-server=${o.proxy.server}`, `--proxy-bypass-list=${o.proxy.bypassList}`);
  if (o.stealth) {
    args.push(
      // navigator.webdriver false natively (no script patch, so no non-native getter).
      '--disable-blink-features=AutomationControlled',
      // Browser-wide, so also what targets the session agent sees late (or never) send and show.
      `--user-agent=${o.stealth.userAgent}`,
      `--lang=${o.stealth.locale}`,
      `--accept-lang=${o.stealth.acceptLanguages.join(',')}`,
      // WebGL through SwiftShader: headful sessions without a GPU have none otherwise; headless gets the same renderer.
      '--enable-unsafe-swiftshader',
      '--use-angle=swiftshader',
    );
  }
  // The viewport is the screen: Xvfb's size for headful sessions, this flag for headless ones
  // (new headless otherwise reports an 800x600 screen).
  if (o.headless) args.push('--headless', `--screen-info={${o.width}x${o.height}}`);
  else if (o.kioskMode) args.push('--kiosk');
  // "--" ends switch parsing, so a URL can never be read as a flag.
  args.push('--', o.startUrl ?? 'about:blank');
  return args;
}
