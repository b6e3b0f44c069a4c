import os from 'node:os';

/** Runs a benchmark's main and prints its result as one JSON object, with the machine it ran on; exits 1 on failure. */
export function runBench(main: () => Promise<Record<string, unknown>>): void {
  main().then(
    (result) => process.stdout.write(`${JSON.stringify({ ...result, machine: { cpus: os.cpus().length, node: process.version } }, null, 2)}\n`),
    (err) => {
      process.stderr.write(`${String(err)}\n`);
      process.exit(1);
    },
  );
}
