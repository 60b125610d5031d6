#!/usr/bin/env node
// Calling dsh-confine from Node.js.
//
// runConfined() spawns `dsh-confine --supervise --report-fd 3 -- COMMAND` with
// an extra stdio pipe as fd 3, collects the JSON-lines report from it, and
// resolves to what happened:
//
//   const out = await runConfined(['make', 'test'], { mode: 'workspace-write', root: repo });
//   if (out.error) ...        // nothing ran: out.error.code, out.error.message
//   else if (out.denied) ...  // the sandbox stopped a write: ask for a wider mode?
//   else ...                  // out.exitStatus is the command's own
//
// `node run-confined.js --self-test` runs a short demonstration that checks
// itself (it is part of dsh-confine's test suite). DSH_CONFINE names the binary.
'use strict';

const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const DSH_CONFINE = process.env.DSH_CONFINE || 'dsh-confine';

function runConfined(argv, { mode = 'read-only', root, options = [] } = {}) {
  const args = ['--supervise', '--report-fd', '3', '--mode', mode];
  if (root) args.push('--root', root);
  args.push(...options, '--', ...argv);
  return new Promise((resolve, reject) => {
    // fd 3 in the child is the write end of a pipe; dsh-confine makes it
    // close-on-exec, so the command itself never holds the report.
    const child = spawn(DSH_CONFINE, args, { stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
    const out = [], err = [], report = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => err.push(d));
    child.stdio[3].on('data', (d) => report.push(d));
    child.on('error', reject);
    // 'close' waits for every stdio stream, the report pipe included.
    child.on('close', (code, signal) => {
      const records = Buffer.concat(report).toString().split('\n').filter((l) => l.trim())
        .map((l) => JSON.parse(l));
      const first = (type) => records.find((r) => r.type === type) || null;
      const result = first('result');
      resolve({
        exitStatus: code,
        signal,
        stdout: Buffer.concat(out).toString(),
        stderr: Buffer.concat(err).toString(),
        records,
        confinement: first('confinement'),
        error: first('error'),   // present: the command did not run (or could not start)
        result,                  // --supervise: how it ended, classified by dsh-confine
        denied: Boolean(result && result.denied),
      });
    });
  });
}

async function selfTest() {
  const ws = fs.mkdtempSync(path.join('/var/tmp', 'dsh-example-node-'));
  const failures = [];
  const expect = (cond, what, out) => {
    console.log((cond ? 'ok     ' : 'FAILED ') + what);
    if (!cond) {
      failures.push(what);
      console.log(`       exit=${out.exitStatus} records=${JSON.stringify(out.records)} stderr=${out.stderr.slice(-500)}`);
    }
  };
  try {
    const note = path.join(ws, 'note.txt');
    const script = `echo hello > ${note}`;
    let out = await runConfined(['sh', '-c', script], { mode: 'read-only', root: ws });
    if (out.error && out.error.code === 'SANDBOX_UNAVAILABLE') {
      console.log(`skipped: no sandbox usable here: ${out.error.message}`);
      return 77;
    }
    expect(out.confinement && out.denied && out.exitStatus !== 0, 'read-only: the write is denied (result.denied)', out);
    expect(!fs.existsSync(note), 'read-only: nothing was written', out);

    // Acting on `denied`: this caller decides a workspace write is fine and retries once.
    if (out.denied) out = await runConfined(['sh', '-c', script], { mode: 'workspace-write', root: ws });
    expect(out.exitStatus === 0 && !out.denied, 'workspace-write: the retry succeeds', out);
    expect(fs.existsSync(note) && fs.readFileSync(note, 'utf8') === 'hello\n', 'workspace-write: the file landed', out);

    out = await runConfined(['sh', '-c', 'exit 7'], { root: ws });
    expect(out.exitStatus === 7 && out.result && out.result.exitCode === 7 && !out.denied,
      "the command's own status comes through", out);

    out = await runConfined(['no-such-command-dsh-example'], { root: ws });
    expect(out.exitStatus === 127 && out.error && out.error.code === 'COMMAND_NOT_FOUND' && !out.confinement,
      'a missing command is an error record, exit 127', out);

    out = await runConfined(['sh', '-c', 'echo permission denied >&2'], { root: ws });
    expect(out.exitStatus === 0 && !out.denied, 'the words alone, with exit 0, are not a denial', out);
  } finally {
    fs.rmSync(ws, { recursive: true, force: true });
  }
  return failures.length ? 1 : 0;
}

module.exports = { runConfined };

if (require.main === module) {
  const argv = process.argv.slice(2);
  if (argv.length === 1 && argv[0] === '--self-test') {
    selfTest().then((code) => process.exit(code), (e) => { console.error(e); process.exit(1); });
  } else if (argv.length === 0) {
    console.error('usage: run-confined.js [--self-test | COMMAND [ARG...]]');
    process.exit(2);
  } else {
    runConfined(argv, { mode: process.env.MODE || 'read-only' }).then((o) => {
      process.stdout.write(o.stdout);
      process.stderr.write(o.stderr);
      if (o.error) console.error(`dsh-confine did not run the command: ${o.error.message}`);
      else if (o.denied) console.error(`the sandbox denied a write under ${o.confinement.mode} mode`);
      process.exit(o.exitStatus === null ? 1 : o.exitStatus);
    });
  }
}
