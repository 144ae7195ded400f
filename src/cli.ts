#!/usr/bin/env node
/**
 * The `runplane` command line.
 *
 * @module
 */
import { readFile, writeFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { parseArgs } from 'node:util';
import { runDemo } from './demo.js';
import { renderTimelinePage } from './inspect/timeline-page.js';
import { parseTimelineTrace } from './inspect/timeline-transition.js';
import { helpHint, runServeCommand, serveOptionsUsage } from './server/serve-command.js';

const usage = `Usage: runplane <command> [options]

Commands:
  serve                     start the HTTP session-events service (options below)
  demo                      run the lifecycle demo: queue, cancel, interrupt, safe-point cancel
  timeline <trace.jsonl>    render a recorded trace (createTimelineRecorder) as an offline HTML
                            page: one swimlane per run, grouped by session

Options of demo and timeline:
  --step-ms <ms>            demo: the toy agent's step time in milliseconds (default 150)
  -o, --out <file.html>     timeline: where to write the page (default: the trace name + .html)
  --title <text>            timeline: the page title (default "runplane timeline")

  -h, --help                show this help

${serveOptionsUsage}`;

/** `runplane timeline trace.jsonl -o timeline.html`. @returns the exit code */
async function timeline(tracePath: string | undefined, out: string | undefined, title?: string) {
  if (tracePath === undefined) {
    process.stderr.write(`timeline: expected a trace file\n${helpHint}`);
    return 2;
  }
  const text = await readFile(tracePath, 'utf8');
  const transitions = parseTimelineTrace(text);
  const target = out ?? `${tracePath.replace(/\.(jsonl|ndjson|json|txt)$/, '')}.html`;
  await writeFile(
    target,
    renderTimelinePage({ trace: transitions, source: basename(tracePath), title }),
  );
  const runs = new Set(transitions.filter((t) => t.actor === 'run').map((t) => t.id)).size;
  process.stdout.write(`wrote ${target}: ${transitions.length} transitions, ${runs} runs\n`);
  return 0;
}

async function main(argv: string[]): Promise<number> {
  // `serve` parses its own flags (src/server/serve-command.ts).
  if (argv[0] === 'serve' && !argv.includes('--help') && !argv.includes('-h')) {
    return runServeCommand(argv.slice(1));
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        help: { type: 'boolean', short: 'h' },
        'step-ms': { type: 'string' },
        out: { type: 'string', short: 'o' },
        title: { type: 'string' },
      },
    });
  } catch (error) {
    // An unknown flag or a flag without its value: a bad flag, like serve's (exit code 2).
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n${helpHint}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command] = positionals;
  if (values.help === true || command === undefined) {
    process.stdout.write(usage);
    return command === undefined && values.help !== true ? 1 : 0;
  }
  if (command === 'demo') {
    const stepMs = values['step-ms'] === undefined ? undefined : Number(values['step-ms']);
    if (stepMs !== undefined && !(Number.isFinite(stepMs) && stepMs > 0)) {
      process.stderr.write(
        `expected \`--step-ms\` to be a positive number, got ${values['step-ms']}\n${helpHint}`,
      );
      return 2;
    }
    await runDemo({ stepMs });
    return 0;
  }
  if (command === 'timeline') return timeline(positionals[1], values.out, values.title);
  process.stderr.write(`unknown command: ${command}\n${helpHint}`);
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
