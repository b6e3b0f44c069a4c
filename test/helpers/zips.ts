import yazl from 'yazl';

/** A zip of the given files (path -> content), made in memory; `mode` per entry for links and such. */
export function makeZip(files: Record<string, string | Buffer>, modes: Record<string, number> = {}): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const [name, content] of Object.entries(files)) {
    if (name.endsWith('/')) zip.addEmptyDirectory(name.slice(0, -1));
    else zip.addBuffer(Buffer.isBuffer(content) ? content : Buffer.from(content), name, modes[name] !== undefined ? { mode: modes[name] } : {});
  }
  zip.end();
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    zip.outputStream.on('data', (c: Buffer) => chunks.push(c));
    zip.outputStream.on('error', reject);
    zip.outputStream.on('end', () => resolve(Buffer.concat(chunks)));
  });
}

/**
 * A zip whose entry is named `evil` (which zip libraries refuse to write): written under a
 * harmless name of the same length, then the name's bytes are replaced everywhere.
 */
export async function zipWithRawName(files: Record<string, string>, harmless: string, evil: string): Promise<Buffer> {
  if (Buffer.byteLength(harmless) !== Buffer.byteLength(evil)) throw new Error('names must have the same byte length');
  const buf = await makeZip(files);
  const from = Buffer.from(harmless);
  const to = Buffer.from(evil);
  let i = buf.indexOf(from);
  let n = 0;
  while (i >= 0) {
    to.copy(buf, i);
    n++;
    i = buf.indexOf(from, i + 1);
  }
  if (n === 0) throw new Error(`${harmless} not found in the archive`);
  return buf;
}

/** A Manifest V3 extension whose content script marks every page's <html> with data-browserd-ext. */
export const MARKER_EXTENSION: Record<string, string> = {
  'manifest.json': JSON.stringify({
    manifest_version: 3,
    name: 'browserd marker',
    version: '1.0.0',
    content_scripts: [{ matches: ['<all_urls>'], js: ['content.js'], run_at: 'document_end' }],
  }),
  'content.js': "document.documentElement.setAttribute('data-browserd-ext', 'ran');",
};
