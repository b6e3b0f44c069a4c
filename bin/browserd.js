#!/usr/bin/env node
// Thin launcher so `npx browserd` runs the compiled CLI.
import('../dist/main.js').then((m) => m.main(process.argv.slice(2))).catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
