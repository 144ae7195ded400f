#!/usr/bin/env node
/**
 * The `runplane` command line.
 *
 * @module
 */
import { parseArgs } from 'node:util';
import { runDemo } from './demo.js';
import { runServeCommand, serveUsage } from './server/serve-command.js';

const usage = `Usage: runplane <command> [options]

Commands:
${serveUsage}
  demo            run the lifecycle demo: queue, cancel, interrupt, safe-point cancel

Options of demo:
  --step-ms <ms>  the toy agent's step time in milliseconds (default 150)

  -h, --help      show this help
`;

async function main(argv: string[]): Promise<number> {
  // `serve` parses its own flags (src/server/serve-command.ts).
  if (argv[0] === 'serve' && !argv.includes('--help') && !argv.includes('-h')) {
    return runServeCommand(argv.slice(1));
  }
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      help: { type: 'boolean', short: 'h' },
      'step-ms': { type: 'string' },
    },
  });
  const [command] = positionals;
  if (values.help === true || command === undefined) {
    process.stdout.write(usage);
    return command === undefined && values.help !== true ? 1 : 0;
  }
  if (command === 'demo') {
    const stepMs = values['step-ms'] === undefined ? undefined : Number(values['step-ms']);
    if (stepMs !== undefined && !(Number.isFinite(stepMs) && stepMs > 0)) {
      process.stderr.write(
        `expected \`--step-ms\` to be a positive number, got ${values['step-ms']}\n`,
      );
      return 2;
    }
    await runDemo({ stepMs });
    return 0;
  }
  process.stderr.write(`unknown command: ${command}\n\n${usage}`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
