// The command line against what pi-post 0.7's own printed (SPEC 8: the wording
// SHOULD be 0.7's; the kit judges only the contract's part of it), and the receipt
// of a send to a live session (SPEC 3.2), which no scenario of the kit sends.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawn, spawnSync } from "node:child_process";
import { addressOf } from "../lib/wire.mjs";

const CLI = new URL("../cli.mjs", import.meta.url).pathname;
const TRANSCRIPTS = new URL("../../../src/pipost_conformance/fixtures/interop/cli-transcripts.json", import.meta.url);
const ID = /[0-9]{13}-[0-9a-f]{8}/g;
const TIME = /[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z/g;

function scratch() {
  const folder = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), "pi-post-node-cli-"));
  return { folder, root: path.join(folder, "post"), home: path.join(folder, "home") };
}

function writeRecord(root, record) {
  fs.mkdirSync(path.join(root, "registry"), { recursive: true, mode: 0o700 });
  fs.writeFileSync(path.join(root, "registry", `${record.address}.json`), JSON.stringify(record), { mode: 0o600 });
}

function environment({ root, home }, extra = {}) {
  const kept = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("PI_")));
  return { ...kept, PI_POST_DIR: root, HOME: home, ...extra };
}

// "<32769 bytes of 'x'>" in a transcript stands for that body.
function argument(word, dev) {
  const long = /^<([0-9]+) bytes of '(.)'>$/.exec(word);
  if (long) return long[2].repeat(Number(long[1]) / Buffer.byteLength(long[2]));
  return word.replaceAll("/home/dev", dev);
}

test("every recorded transcript of pi-post 0.7, replayed in order, prints what 0.7 printed", () => {
  const { fixture, transcripts } = JSON.parse(fs.readFileSync(TRANSCRIPTS, "utf8"));
  const place = scratch();
  const dev = path.join(place.folder, "dev"); // /home/dev of the recording
  const now = Date.now();
  for (const { record, lastSeenAgoMs } of fixture) {
    const cwd = record.cwd.replace("/home/dev", dev);
    fs.mkdirSync(cwd, { recursive: true });
    const shifted = { ...record, cwd, lastSeen: now - lastSeenAgoMs, startedAt: now - lastSeenAgoMs - (record.lastSeen - record.startedAt) };
    if (record.pid !== undefined) shifted.pid = process.pid; // "<pid of a live process>"; no pidStart, as 0.7 writes
    writeRecord(place.root, shifted);
  }
  assert.ok(transcripts.length > 20);
  // Ids and send times are the run's own; the ages are whole minutes and days, far from a unit's edge.
  const same = (text) => text.replaceAll("/home/dev", dev).replace(ID, "<id>").replace(TIME, "<time>");
  const differ = [];
  for (const t of transcripts) {
    const ran = spawnSync("node", [CLI, ...t.argv.slice(1).map((word) => argument(word, dev))], {
      cwd: t.cwd.replace("/home/dev", dev),
      env: environment(place, t.env),
      input: t.stdin ?? "",
      encoding: "utf8",
    });
    // 0.7's error lines first; lines of our own may follow (the reachable sessions, SPEC 4).
    const expected = same(t.stderr).replace(/\n$/, "");
    const rest = same(ran.stderr).slice(expected.length);
    const stderrAgrees = same(ran.stderr).startsWith(expected) && (rest === "" || rest.startsWith("\n"));
    if (ran.status !== t.exit || same(ran.stdout) !== same(t.stdout) || !stderrAgrees) {
      differ.push(`${t.label}: exit ${ran.status} (0.7: ${t.exit})\n${ran.stdout}${ran.stderr}0.7:\n${t.stdout}${t.stderr}`);
    }
  }
  assert.deepEqual(differ, [], `${differ.length} of ${transcripts.length} differ:\n${differ.join("\n")}`);
});

// One send to a live session while this process takes the letter the moment it
// appears: {stdout, code, takenAfterMs} — how long after the letter was written
// (its mtime, never later than the deposit's end) it was unlinked.
async function sendWhileTaking(place, cwd, address) {
  const mailbox = path.join(place.root, "inbox", address);
  const child = spawn("node", [CLI, "send", "--to", "taker", "--body", "take me"], { cwd, env: environment(place) });
  let stdout = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  let takenAfterMs = null;
  const taker = setInterval(() => {
    for (const name of fs.existsSync(mailbox) ? fs.readdirSync(mailbox) : []) {
      if (!name.endsWith(".json") || takenAfterMs !== null) continue;
      const written = fs.statSync(path.join(mailbox, name)).mtimeMs;
      fs.rmSync(path.join(mailbox, name));
      takenAfterMs = Date.now() - written;
    }
  }, 5);
  const code = await exited;
  clearInterval(taker);
  return { stdout, code, takenAfterMs };
}

test("a send to a live session whose letter is taken within 1.5 s says delivered", async (t) => {
  const place = scratch();
  const sessionId = "019a3f40-0000-7000-8000-00000000000d";
  const address = addressOf(sessionId);
  const cwd = path.join(place.folder, "taker");
  fs.mkdirSync(cwd, { recursive: true });
  writeRecord(place.root, { v: 1, address, sessionId, name: "taker", cwd, pid: process.pid, startedAt: Date.now(), lastSeen: Date.now() });
  // Only a letter taken inside the window can be judged; a machine too busy to
  // take it in time gets another try (the verdict never rests on its speed).
  for (let attempt = 0; attempt < 5; attempt++) {
    const { stdout, code, takenAfterMs } = await sendWhileTaking(place, cwd, address);
    assert.equal(code, 0);
    if (takenAfterMs === null || takenAfterMs >= 1500) continue;
    assert.match(stdout, new RegExp(`^delivered ${address} [0-9]{13}-[0-9a-f]{8}\n$`));
    return;
  }
  t.skip("five letters in a row could not be taken within 1.5 s of their writing: the machine is too busy to judge");
});
