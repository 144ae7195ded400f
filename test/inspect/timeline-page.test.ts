import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Script } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { renderTimelinePage, type TimelineTransition } from '../../src/index.js';
import { timelineViewerScript } from '../../src/inspect/timeline-viewer-script.js';

const run = promisify(execFile);
const root = join(import.meta.dirname, '..', '..');
const artifacts = join(root, 'test-artifacts', 'timeline-page');

const hostile: TimelineTransition = {
  t: 5,
  actor: 'run',
  id: '</script><img src=x onerror=alert(1)>',
  parentId: 'o/s',
  from: null,
  to: 'CREATED',
  event: 'xstate.init',
  cause: null,
};

describe('renderTimelinePage', () => {
  it('is one self-contained document: inline script that parses, CSP, no remote URL', () => {
    const html = renderTimelinePage({ trace: [hostile], title: 'T & <b>' });
    expect(() => new Script(timelineViewerScript)).not.toThrow(); // compiles: valid syntax
    expect(html).toContain(
      `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src data:">`,
    );
    expect(html).not.toMatch(/https?:\/\//); // no CDN, no remote anything
    expect(html).not.toMatch(/<script[^>]+src=/);
    expect(html).toContain('<title>T &amp; &lt;b&gt;</title>');
  });

  it('embeds the trace as escaped JSONL that reads back, and markup in ids stays text', () => {
    const html = renderTimelinePage({ trace: [hostile] });
    expect(html).not.toContain('</script><img');
    const embedded =
      /<script type="application\/x-ndjson" id="runplane-trace">(.*?)<\/script>/s.exec(html)?.[1];
    expect(embedded).toBeDefined();
    expect(JSON.parse(embedded!)).toMatchObject({ id: hostile.id, parentId: 'o/s' });
    expect(timelineViewerScript).not.toMatch(/innerHTML/);
  });

  it('validates a JSONL trace and bakes a live URL in when asked', () => {
    expect(() => renderTimelinePage({ trace: '{"t":1}\n' })).toThrow(
      /^INVALID_ARGUMENT: expected `trace` line 1/,
    );
    const live = renderTimelinePage({ liveUrl: '/inspect/stream?x="y"' });
    expect(live).toContain('data-live-url="/inspect/stream?x=&quot;y&quot;"');
  });
});

describe('runplane timeline', () => {
  // Starts several `runplane` processes (each compiles the sources with tsx: seconds on a
  // loaded host).
  it(
    'writes the page next to the trace, or to -o; exits 2 without a file and 1 on a bad trace',
    { timeout: 120_000 },
    async () => {
      mkdirSync(artifacts, { recursive: true });
      const trace = join(artifacts, 'cli-trace.jsonl');
      writeFileSync(
        trace,
        '{"t":0,"actor":"run","id":"r1","parentId":"a/s","to":"CREATED","event":"xstate.init"}\n' +
          '{"t":4,"actor":"run","id":"r1","from":"CREATED","to":"CANCELLED.settled","event":"run.cancel","cause":"cancel"}\n',
      );
      const cli = (...args: string[]) =>
        run(process.execPath, ['--import', 'tsx', join(root, 'src', 'cli.ts'), ...args], {
          cwd: root,
        });

      const out = join(artifacts, 'cli-timeline.html');
      const { stdout } = await cli('timeline', trace, '-o', out, '--title', 'CLI run');
      expect(stdout).toBe(`wrote ${out}: 2 transitions, 1 runs\n`);
      const html = readFileSync(out, 'utf8');
      expect(html).toContain('<title>CLI run</title>');
      expect(html).toContain('data-source="cli-trace.jsonl"');
      expect(html).toContain('"to":"CANCELLED.settled"');

      await cli('timeline', trace);
      expect(readFileSync(join(artifacts, 'cli-trace.html'), 'utf8')).toBe(
        html
          .replace('<title>CLI run</title>', '<title>runplane timeline</title>')
          .replace('<h1>CLI run</h1>', '<h1>runplane timeline</h1>'),
      );

      await expect(cli('timeline')).rejects.toMatchObject({ code: 2 });
      writeFileSync(join(artifacts, 'bad.jsonl'), 'not json\n');
      const failure = await cli('timeline', join(artifacts, 'bad.jsonl')).then(
        () => ({ code: 0, stderr: '' }),
        (error: { code: number; stderr: string }) => error,
      );
      expect(failure.code).toBe(1);
      expect(failure.stderr).toMatch(/^INVALID_ARGUMENT: expected `trace` line 1/);
    },
  );
});
