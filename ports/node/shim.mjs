#!/usr/bin/env node
// The conformance shim: pi-post's driver protocol, version 1 (JSON lines on
// stdin/stdout), over the library in ./lib. It keeps the world of `open`: a
// fake clock, a fake process table, home, and the receiving sessions.
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { addressOf, defaultName, encodeEscaped, parseLetter, plain, reason } from "./lib/wire.mjs";
import { Failed, Refused } from "./lib/disk.mjs";
import { checkedAddress } from "./lib/mailbox.mjs";
import { PostOffice, canonical } from "./lib/post.mjs";
import { Context, Receiver } from "./lib/receive.mjs";

const PROTOCOL = 1;
const VERSION = JSON.parse(fs.readFileSync(new URL("./package.json", import.meta.url), "utf8")).version;
const FIRST_PID = 7000;

class Misuse extends Error {}

// Argument types; a trailing "?" marks an argument with a default (omitted when defaulted).
const OPS = {
  open: { root: "string", home: "string?", now: "int?", protocol: "int" },
  capabilities: {},
  set_clock: { now: "int" },
  advance_clock: { ms: "int" },
  process_start: { pid: "int?" },
  process_stop: { pid: "int" },
  process_recycle: { pid: "int" },
  register: { session_id: "string", cwd: "string", name: "string?", pid: "int?" },
  heartbeat: { session_id: "string" },
  shutdown: { session_id: "string" },
  send: { targets: "strings", body: "string", cwd: "string", label: "string?", session: "string?", reply_to: "string?", home: "string?" },
  list: { all: "bool?" },
  resolve: { handle: "string", cwd: "string", home: "string?" },
  record: { address: "string" },
  peek: { address: "string" },
  count: { address: "string" },
  take: { address: "string" },
  deliver: {
    session_id: "string", receiver: "string?", context: "string?", fail: "int?", fail_unlink: "int?",
    crash: "string?", inbound: "string?", resume: "string?", trigger: "string?",
  },
  race: { session_id: "string", receivers: "strings", context: "string?" },
  sweep: {},
  address_of: { session_id: "string" },
  parse: { text: "string?", raw_base64: "string?", file_name: "string?" },
};

const TYPES = {
  int: (v) => typeof v === "number" && Number.isInteger(v),
  string: (v) => typeof v === "string",
  bool: (v) => typeof v === "boolean",
  strings: (v) => Array.isArray(v) && v.every((s) => typeof s === "string"),
};

function checkArgs(op, args) {
  const spec = OPS[op];
  if (!spec) throw new Misuse(`no operation ${JSON.stringify(op)}`);
  for (const key of Object.keys(args)) if (!(key in spec)) throw new Misuse(`${op} takes no argument ${JSON.stringify(key)}`);
  for (const [key, type] of Object.entries(spec)) {
    const optional = type.endsWith("?");
    if (!(key in args)) {
      if (!optional) throw new Misuse(`${op} needs the argument ${JSON.stringify(key)}`);
      continue;
    }
    if (!TYPES[type.replace("?", "")](args[key])) throw new Misuse(`${op}: ${key} must be of type ${type.replace("?", "")}`);
  }
}

class World {
  constructor({ root, home, now }) {
    if (!path.isAbsolute(root)) throw new Misuse("open: root must be an absolute path");
    fs.mkdirSync(root, { recursive: true, mode: 0o700 });
    this.now = now;
    this.elapsed = 0; // the monotonic clock: it follows the wall clock forward, never back
    this.home = home;
    this.table = new Map(); // pid → birth token
    this.births = 0;
    this.nextPid = FIRST_PID;
    this.receivers = new Map(); // receiver name → Receiver, while it runs
    this.contexts = new Map(); // receiver name → Context: it outlives a crash, as a transcript does
    this.sessionOfReceiver = new Map(); // receiver name → the session it receives for, for good
    const processes = {
      exists: (pid) => this.table.has(pid),
      start: (pid) => this.table.get(pid),
    };
    this.post = new PostOffice({ root, clock: () => this.now, processes });
  }

  // Time passes when the clock moves forward; moved back, the wall clock steps and
  // the monotonic one, which the loop guard's windows run on, stays (SPEC 6.1).
  advance(ms) {
    this.now += ms;
    this.elapsed += Math.max(ms, 0);
    return { now: this.now };
  }

  birth(pid) {
    this.table.set(pid, `node-birth-${++this.births}`);
    return pid;
  }

  freshPid() {
    while (this.table.has(this.nextPid)) this.nextPid++;
    return this.birth(this.nextPid++);
  }

  needRecord(sessionId) {
    const record = this.post.registry.read(addressOf(sessionId));
    if (!record) throw new Refused(reason("no_record", `no session ${JSON.stringify(sessionId)} is registered`, { session_id: sessionId }));
    return record;
  }

  // The receiver of that name, made on first use (or after a crash, a restart
  // with the context it had).
  receiverFor(name, sessionId, contextKind) {
    const session = this.sessionOfReceiver.get(name);
    if (session !== undefined && session !== sessionId) throw new Misuse(`receiver ${JSON.stringify(name)} receives for another session`);
    if (contextKind !== undefined && !["ledger", "plain"].includes(contextKind)) throw new Misuse(`no context ${JSON.stringify(contextKind)}`);
    const context = this.contexts.get(name);
    if (context && contextKind !== undefined && context.kind !== contextKind) throw new Misuse(`receiver ${JSON.stringify(name)} has a ${context.kind} context`);
    if (!context) this.contexts.set(name, new Context(contextKind ?? "ledger"));
    this.sessionOfReceiver.set(name, sessionId);
    if (!this.receivers.has(name)) this.receivers.set(name, new Receiver(this.post, addressOf(sessionId), this.contexts.get(name), () => this.elapsed));
    return this.receivers.get(name);
  }

  call(op, a) {
    const post = this.post;
    switch (op) {
      case "capabilities":
        return { ops: Object.keys(OPS).filter((op) => op !== "open").sort() };
      case "set_clock":
        return this.advance(a.now - this.now);
      case "advance_clock":
        return this.advance(a.ms);
      case "process_start":
        if (a.pid === undefined) return { pid: this.freshPid() };
        if (this.table.has(a.pid)) throw new Refused(reason("pid_running", `pid ${a.pid} already runs`, { pid: a.pid }));
        return { pid: this.birth(a.pid) };
      case "process_stop":
        if (!this.table.delete(a.pid)) throw new Refused(reason("no_process", `no process has pid ${a.pid}`, { pid: a.pid }));
        return { pid: a.pid };
      case "process_recycle":
        return { pid: this.birth(a.pid) };
      case "register": {
        const cwd = canonical(a.cwd);
        const pid = a.pid ?? this.freshPid();
        if (!this.table.has(pid)) throw new Refused(reason("no_process", `no process has pid ${pid}`, { pid }));
        const address = addressOf(a.session_id);
        const record = post.registry.register({
          sessionId: a.session_id, name: a.name ?? defaultName(cwd, address), cwd,
          pid, pidStart: this.table.get(pid), now: this.now,
        });
        return post.session(address, record);
      }
      case "heartbeat":
        return post.session(addressOf(a.session_id), post.registry.heartbeat(this.needRecord(a.session_id), this.now));
      case "shutdown":
        return post.session(addressOf(a.session_id), post.registry.shutdown(this.needRecord(a.session_id), this.now));
      case "send":
        return {
          receipts: post.send({
            targets: a.targets, body: a.body, cwd: a.cwd, home: a.home ?? this.home,
            session: a.session, label: a.label, replyTo: a.reply_to,
          }),
        };
      case "list":
        return post.list({ all: a.all ?? false });
      case "resolve":
        return post.resolve(a.handle, { cwd: a.cwd, home: a.home ?? this.home });
      case "record": {
        const address = checkedAddress(a.address);
        return post.session(address, post.registry.read(address));
      }
      case "peek":
        return { letters: post.mailboxes.peek(checkedAddress(a.address)) };
      case "count":
        return { count: post.mailboxes.count(checkedAddress(a.address)) };
      case "take": {
        const address = checkedAddress(a.address);
        const set_aside = [];
        for (const claim of post.mailboxes.claims(address)) {
          if (claim.rejected) {
            if (claim.setAside()) set_aside.push({ name: claim.name, reason: claim.rejected });
            continue;
          }
          try {
            claim.dispose();
          } catch (e) {
            claim.release();
            throw e;
          }
          return { message: claim.message, set_aside };
        }
        return { message: null, set_aside };
      }
      case "deliver": {
        if (a.crash !== undefined && a.crash !== "after_entry") throw new Misuse(`deliver: no crash ${JSON.stringify(a.crash)}`);
        if (a.trigger !== undefined && !["event", "poll"].includes(a.trigger)) throw new Misuse(`deliver: no trigger ${JSON.stringify(a.trigger)}`);
        const name = a.receiver ?? a.session_id;
        const receiver = this.receiverFor(name, a.session_id, a.context);
        let failures = a.fail ?? 0;
        let refusedUnlinks = a.fail_unlink ?? 0;
        const steps = receiver.drain({
          accept: () => (failures > 0 ? (failures--, false) : true),
          unlinkAllowed: () => (refusedUnlinks > 0 ? (refusedUnlinks--, false) : true),
          inbound: a.inbound ?? "accept",
          resume: a.resume ?? "wake",
          crashAfterEntry: a.crash === "after_entry",
        });
        let step;
        do step = steps.next();
        while (!step.done);
        if (step.value.crashed) this.receivers.delete(name);
        // Both triggers drain every letter on disk: the watch only says when to look.
        return step.value;
      }
      case "race": {
        if (a.receivers.length < 2) throw new Misuse("race needs two or more receivers");
        const runs = a.receivers.map((name) => ({
          receiver: this.receiverFor(name, a.session_id, a.context),
          steps: null,
          total: { entered: [], dropped: [], set_aside: [] },
          done: false,
        }));
        const options = { accept: () => true, unlinkAllowed: () => true, inbound: "accept", resume: "wake", crashAfterEntry: false };
        // Interleaved a claim at a time, each receiver draining until it can take nothing more.
        while (runs.some((run) => !run.done)) {
          for (const run of runs.filter((r) => !r.done)) {
            run.steps ??= run.receiver.drain(options);
            const step = run.steps.next();
            if (!step.done) continue;
            run.steps = null;
            const took = step.value.entered.length + step.value.dropped.length + step.value.set_aside.length;
            for (const key of Object.keys(run.total)) run.total[key].push(...step.value[key]);
            if (!took) run.done = true;
          }
        }
        return { receivers: runs.map((run) => run.total) };
      }
      case "sweep":
        return post.sweep();
      case "address_of":
        return { address: addressOf(a.session_id) };
      case "parse": {
        if ((a.text === undefined) === (a.raw_base64 === undefined)) throw new Misuse("parse takes text or raw_base64, one of them");
        const bytes = a.text !== undefined ? encodeEscaped(a.text) : Buffer.from(a.raw_base64, "base64");
        const parsed = parseLetter(bytes, a.file_name);
        return parsed.message ? { message: parsed.message } : { rejected: parsed.rejected };
      }
    }
    throw new Misuse(`no operation ${JSON.stringify(op)}`);
  }
}

function open(args) {
  checkArgs("open", args);
  if (args.protocol !== PROTOCOL) throw new Misuse(`this shim speaks driver protocol ${PROTOCOL}, not ${JSON.stringify(args.protocol)}`);
  const world = new World({ root: args.root, home: args.home ?? process.env.HOME ?? "/", now: args.now ?? 1796078534257 });
  return {
    world,
    result: { root: args.root, protocol: PROTOCOL, implementation: { name: "pi-post-node", version: VERSION, language: "JavaScript" } },
  };
}

let world = null;

function answer(line) {
  let request;
  try {
    request = JSON.parse(line);
  } catch (e) {
    return { id: null, error: `not a JSON line: ${e.message}` };
  }
  if (typeof request !== "object" || request === null || Array.isArray(request)) return { id: null, error: "a request is a JSON object" };
  const { id = null, op, args = {} } = request;
  try {
    if (typeof args !== "object" || args === null || Array.isArray(args)) throw new Misuse("args must be an object");
    if (op === "open") {
      const opened = open(args);
      world = opened.world;
      return { id, result: opened.result };
    }
    if (!world) throw new Misuse("open comes first");
    checkArgs(op, args);
    return { id, result: plain(world.call(op, args)) };
  } catch (e) {
    if (e instanceof Refused) return { id, result: { refused: e.reason } };
    if (e instanceof Failed) return { id, result: { failed: e.reason } };
    if (e instanceof Misuse) return { id, error: e.message };
    if (e && typeof e.code === "string" && typeof e.syscall === "string") {
      return { id, result: { failed: reason("io_error", `${e.syscall} failed: ${e.code}${e.path ? ` (${e.path})` : ""}`) } };
    }
    process.stderr.write(`pi-post-node shim: ${e?.stack ?? e}\n`);
    return { id, error: `internal error: ${e?.message ?? e}` };
  }
}

for await (const line of readline.createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line.trim() === "") continue;
  process.stdout.write(`${JSON.stringify(answer(line))}\n`);
}
