#!/usr/bin/env node
// The pi-post command line of SPEC 8 — send, list, resolve, peek, whoami — over
// the library in ./lib, on the real clock and the machine's process table.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { BODY_CAP, addressOf, decodeUtf8, isAddress, reason } from "./lib/wire.mjs";
import { Failed, Refused } from "./lib/disk.mjs";
import { PostOffice, checkBody } from "./lib/post.mjs";
import { LINE_BREAK, spellOut } from "./lib/frame.mjs";

// pi-post 0.7's words wherever its recorded transcripts show them (SPEC 8: the
// wording SHOULD be 0.7's; the kit ships them, fixtures/interop/cli-transcripts.json).
const USAGE = `usage: pi-post send --to <target> [--to <target> …] [--body <text>] [--from <label>] [--reply-to <addr>|none]
       pi-post list [--all] | resolve <target> | peek <target> | whoami
`;

const RECEIPT_WINDOW_MS = 1500; // SPEC 3.2: one deadline for the whole send
const RECEIPT_POLL_MS = 25;
const DAY_MS = 86_400_000;

// A misuse of the command line (an unknown command or option, a missing value).
class Misuse extends Error {}

// -- what was given: words, variables, standard input -------------------------------

const pause = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

// Node decodes argv and the environment lossily; the kernel keeps the bytes given.
function rawEntries(file) {
  try {
    const bytes = fs.readFileSync(file);
    const entries = [];
    for (let start = 0; start < bytes.length; ) {
      const end = bytes.indexOf(0, start);
      entries.push(bytes.subarray(start, end === -1 ? bytes.length : end));
      start = end === -1 ? bytes.length : end + 1;
    }
    return entries;
  } catch {
    return null; // no /proc: nothing more to check than Node gave
  }
}

// SPEC 8.6 (SHOULD): an argument or a variable that is not UTF-8 is refused, naming it.
function checkUtf8(words, names) {
  const given = rawEntries("/proc/self/cmdline");
  if (given) {
    const mine = given.slice(given.length - words.length);
    mine.forEach((bytes, at) => {
      if (decodeUtf8(bytes) === null) throw new Misuse(`argument ${at + 1} is not UTF-8 text`);
    });
  }
  for (const bytes of rawEntries("/proc/self/environ") ?? []) {
    const equals = bytes.indexOf(0x3d);
    const name = bytes.subarray(0, equals).toString("latin1");
    if (names.includes(name) && decodeUtf8(bytes.subarray(equals + 1)) === null) {
      throw new Misuse(`${name} is not UTF-8 text`);
    }
  }
}

const variable = (name) => (process.env[name] === "" ? undefined : process.env[name]);

// SPEC 8.7: PI_POST_DIR, ~/ expanded against HOME; a relative path is refused.
function postOfficeFolder(home) {
  const given = variable("PI_POST_DIR");
  if (given === undefined) return path.join(home, ".pi", "agent", "post");
  const expanded = given === "~" ? home : given.startsWith("~/") ? path.join(home, given.slice(2)) : given;
  if (!path.isAbsolute(expanded)) {
    throw new Misuse(`PI_POST_DIR is ${given}, a relative path: it would name another post office in every folder; give an absolute path (or one starting with ~/)`);
  }
  return path.normalize(expanded);
}

// The body on standard input, read as bytes and no further than one byte past the cap.
function readBody() {
  const buffer = Buffer.alloc(BODY_CAP + 1);
  let filled = 0;
  while (filled < buffer.length) {
    let got;
    try {
      got = fs.readSync(0, buffer, filled, buffer.length - filled, null);
    } catch (e) {
      if (e.code === "EAGAIN") {
        pause(5);
        continue;
      }
      if (e.code === "EOF" || e.code === "EBADF") break; // no standard input: an empty body
      throw e;
    }
    if (got === 0) break;
    filled += got;
  }
  if (filled > BODY_CAP) {
    throw new Refused(reason("body_too_large", `the body on standard input is over the cap of ${BODY_CAP} bytes; send a path instead`, { cap: BODY_CAP }));
  }
  const text = decodeUtf8(buffer.subarray(0, filled));
  if (text === null) throw new Refused(reason("body_not_text", "standard input is not UTF-8 text"));
  return text;
}

// Words → {options, positional}. `takes` maps each option to "one", "many" or "flag".
function parse(words, takes) {
  const options = {};
  const positional = [];
  for (let at = 0; at < words.length; at++) {
    const word = words[at];
    if (!word.startsWith("--") || word === "--") {
      positional.push(...(word === "--" ? words.slice(at + 1) : [word]));
      if (word === "--") break;
      continue;
    }
    const equals = word.indexOf("=");
    const name = equals === -1 ? word : word.slice(0, equals);
    const kind = takes[name];
    if (!kind) throw new Misuse(`no option ${name}`);
    if (kind === "flag") {
      if (equals !== -1) throw new Misuse(`${name} takes no value`);
      options[name] = true;
      continue;
    }
    let value = equals === -1 ? words[++at] : word.slice(equals + 1);
    if (value === undefined) throw new Misuse(`${name} needs a value`);
    if (kind === "many") (options[name] ??= []).push(value);
    else if (name in options) throw new Misuse(`${name} given twice`);
    else options[name] = value;
  }
  return { options, positional };
}

function oneTarget(command, positional) {
  if (positional.length !== 1) throw new Misuse(`${command} takes one target, not ${positional.length}`);
  return positional[0];
}

// -- the machine ---------------------------------------------------------------------

// /proc/<pid>/stat after the name: field 3 (the state) first, field 22 (starttime) at 19.
function statOf(pid) {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, "latin1");
    return text.slice(text.lastIndexOf(")") + 2).split(" ");
  } catch (e) {
    return e.code === "ENOENT" ? null : undefined; // undefined: it cannot be told
  }
}

// Presence asks whether a pid runs (a zombie does not) and when it started, as
// the kernel says it (SPEC 2: pipost's pidStart on Linux).
const machine = {
  exists(pid) {
    const fields = statOf(pid);
    if (fields !== undefined) return fields !== null && fields[0] !== "Z";
    try {
      process.kill(pid, 0);
      return true;
    } catch (e) {
      return e.code === "EPERM";
    }
  },
  start: (pid) => statOf(pid)?.[19],
};

// -- what it prints --------------------------------------------------------------------

const shown = (text) => spellOut(String(text));
const ANY_BREAK = new RegExp(LINE_BREAK.source, "g");
const oneLine = (text) => spellOut(text.replace(ANY_BREAK, " "));

// Whole units, rounded down; an age from a clock set back is taken as recent (SPEC 2).
function age(ms) {
  const seconds = Math.floor(Math.max(ms, 0) / 1000);
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86400)}d`;
}

const sessionHandle = (sessionId) => sessionId.split("-").slice(0, 3).join("-");
const queuedNote = (queued) => (queued ? `, ${queued} queued` : "");

function listLine({ address, record, presence, queued }, now) {
  const seen = age(now - record.lastSeen);
  const state = presence === "live" ? "live" : presence === "stalled" ? `not responding, seen ${seen} ago` : `offline ${seen} ago`;
  return `${shown(record.name)} — ${address} (${state}${queuedNote(queued)}) ${shown(record.cwd)} [pi --session ${shown(sessionHandle(record.sessionId))}]`;
}

function card({ address, record, presence, queued }, now) {
  const field = (label, value) => `${`${label}:`.padEnd(10)}${value}`;
  if (!record) {
    return [
      field("address", address),
      "no registry record — the session never registered here, or its record was swept",
      ...(queued ? [field("queued", queued)] : []),
    ];
  }
  const word = presence === "stalled" ? `stalled (not responding, seen ${age(now - record.lastSeen)} ago)` : presence;
  return [
    field("name", shown(record.name)),
    field("address", address),
    field("session", shown(record.sessionId)),
    field("presence", `${word}${queuedNote(queued)}`),
    field("cwd", shown(record.cwd)),
    field("resume", `cd ${shown(record.cwd)} && pi --session ${shown(sessionHandle(record.sessionId))}`),
  ];
}

const quoted = (text) => JSON.stringify(text);

// A refusal of the library, as lines, in the words pi-post 0.7 uses for it where
// it has any; the library's own text otherwise. The facts are the reason's.
function wording(post, why) {
  const named = (address) => {
    const record = post.registry.read(address);
    return record ? `${record.name} (${address})` : address;
  };
  switch (why.code) {
    case "empty_body":
      return ["empty body (pass --body or pipe stdin)"];
    case "body_too_large":
      return [`body is ${why.size ?? `over ${why.cap}`} bytes; the cap is ${why.cap} (send a summary and a path, not a payload)`];
    case "no_targets":
      return ["send requires --to <target>"];
    case "too_many_targets":
      return [`${why.count} targets in one send; the cap is ${why.cap} — a wider fan-out is a broadcast, not a message`];
    case "ambiguous_target":
      return [
        `${quoted(why.handle)} matches more than one session; use an address:`,
        ...why.candidates.map((address) => `  ${named(address)} — ${post.registry.read(address)?.cwd ?? "?"}`),
      ];
    case "unknown_target": {
      const first = why.path !== undefined
        ? `no session is registered in ${why.path} — a directory names the session running in it`
        : `${quoted(why.handle)} is not an address, a session id, a directory with a registered session, or a known session name`;
      // SPEC 4 (SHOULD): the sessions that can be reached, which 0.7 does not list.
      return why.reachable.length ? [first, `  sessions you can reach: ${why.reachable.map(named).join(", ")}`] : [first];
    }
    default:
      return [why.text];
  }
}

function peekLine(letter) {
  if (letter.rejected) return `(not a message: ${shown(letter.name)} — ${shown(letter.rejected.text)})`;
  const { sentAt, from, body } = letter.message;
  return `${new Date(sentAt).toISOString()} ${oneLine(from.name)}: ${oneLine(body)}`;
}

// -- the commands ------------------------------------------------------------------------

// What only looks (resolve, peek) shows a bare address even with neither record
// nor mailbox (SPEC 4); anything else is resolved as a send would.
function lookUp(post, handle, where) {
  if (!isAddress(handle)) return post.resolve(handle, where);
  post.checkRoot();
  return post.session(handle, post.registry.read(handle));
}

// Until the deadline, which of these letters have vanished: the receivers'
// receipts. The last look comes after the deadline, so none taken in time is missed.
function awaitTaken(post, letters) {
  const deadline = performance.now() + RECEIPT_WINDOW_MS;
  const taken = new Set();
  for (;;) {
    const last = performance.now() >= deadline;
    for (const { address, id } of letters) if (!taken.has(id) && !post.mailboxes.holds(address, id)) taken.add(id);
    if (taken.size === letters.length || last) return taken;
    pause(Math.min(RECEIPT_POLL_MS, Math.max(deadline - performance.now(), 0)));
  }
}

function replyAddress(given) {
  const sources = [
    ["--reply-to", given],
    ["PI_POST_REPLY_TO", variable("PI_POST_REPLY_TO")],
  ];
  for (const [source, value] of sources) {
    if (value === undefined) continue;
    if (value !== "none" && !isAddress(value)) {
      throw new Refused(reason("bad_envelope", `${source} is ${value}, which is no address (s- and 12 hex digits) nor none`, { field: "replyTo" }));
    }
    return value;
  }
  const session = variable("PI_SESSION_ID");
  return session === undefined ? undefined : addressOf(session);
}

const COMMANDS = {
  send(words, { post, cwd, home, out }) {
    const { options, positional } = parse(words, { "--to": "many", "--body": "one", "--from": "one", "--reply-to": "one" });
    if (positional.length) throw new Misuse(`send takes its targets with --to, not ${positional[0]}`);
    const body = options["--body"] ?? readBody();
    checkBody(body); // before the reply address or any target (SPEC 8.1)
    const receipts = post.send({
      targets: options["--to"] ?? [],
      body,
      cwd,
      home,
      label: options["--from"] ?? variable("PI_POST_FROM"),
      replyTo: replyAddress(options["--reply-to"]),
      awaitTaken: (letters) => awaitTaken(post, letters),
    });
    for (const { address, id, delivered } of receipts) out(`${delivered ? "delivered" : "queued"} ${address} ${id}`);
  },

  list(words, { post, out }) {
    const { positional, options } = parse(words, { "--all": "flag" });
    if (positional.length) throw new Misuse(`list takes no target, not ${positional[0]}`);
    const now = Date.now();
    const { sessions, hidden } = post.list({ all: options["--all"] === true });
    if (!sessions.length && !hidden) return out("no sessions are registered");
    for (const session of sessions) out(listLine(session, now));
    if (hidden) {
      out(`… and ${hidden} offline session${hidden === 1 ? "" : "s"} unseen for over a day (--all lists them)`);
    }
  },

  resolve(words, { post, cwd, home, out }) {
    const { positional } = parse(words, {});
    const session = lookUp(post, oneTarget("resolve", positional), { cwd, home });
    for (const line of card(session, Date.now())) out(line);
  },

  peek(words, { post, cwd, home, out }) {
    const { positional } = parse(words, {});
    const { address } = lookUp(post, oneTarget("peek", positional), { cwd, home });
    const letters = post.mailboxes.peek(address);
    if (!letters.length) return out(`empty ${address}`);
    for (const letter of letters) out(peekLine(letter));
  },

  whoami(words, { out }) {
    const { positional } = parse(words, {});
    if (positional.length) throw new Misuse(`whoami takes nothing, not ${positional[0]}`);
    const session = variable("PI_SESSION_ID");
    if (session === undefined) throw new Misuse("PI_SESSION_ID is not set (run inside a pi bash tool, or use an explicit address)");
    out(addressOf(session));
  },
};

// -- running -------------------------------------------------------------------------------

// Whole lines, written at once; a reader that went away ends us as SIGPIPE would.
function writer(fd) {
  return (line) => {
    const bytes = Buffer.from(`${line}\n`, "utf8");
    for (let at = 0; at < bytes.length; ) {
      try {
        at += fs.writeSync(fd, bytes, at);
      } catch (e) {
        if (e.code === "EAGAIN") pause(5);
        else if (e.code === "EPIPE") diesOfSigpipe();
        else throw e;
      }
    }
  };
}

// Node ignores SIGPIPE; a handler added and removed gives it back its default
// disposition, under which the signal ends the process, as coreutils are ended.
function diesOfSigpipe() {
  const nothing = () => {};
  process.on("SIGPIPE", nothing);
  process.off("SIGPIPE", nothing);
  process.kill(process.pid, "SIGPIPE");
  process.exit(141); // if the signal was blocked after all
}

function main(words) {
  const out = writer(1);
  const err = writer(2);
  // Each line spelled out: only the breaks between them are raw.
  const fail = (lines) => (err(`pi-post: ${lines.map(shown).join("\n")}`), 1);
  let post = null;
  try {
    checkUtf8(words, ["PI_POST_DIR", "PI_SESSION_ID", "PI_POST_FROM", "PI_POST_REPLY_TO", "HOME"]);
    const [command, ...rest] = words;
    if (command === undefined) {
      out(USAGE.trimEnd());
      return 0;
    }
    if (!Object.hasOwn(COMMANDS, command)) {
      out(USAGE.trimEnd()); // as pi-post 0.7 does: the usage alone, on standard output
      return 1;
    }
    const home = variable("HOME") ?? os.homedir();
    const root = command === "whoami" ? null : postOfficeFolder(home);
    post = new PostOffice({ root, clock: () => Date.now(), processes: machine });
    COMMANDS[command](rest, { post, cwd: process.cwd(), home, out });
    return 0;
  } catch (e) {
    if (e instanceof Refused) return fail(wording(post, e.reason));
    if (e instanceof Failed || e instanceof Misuse) return fail([e.message]);
    if (e && typeof e.code === "string" && typeof e.syscall === "string") return fail([`${e.syscall} failed: ${e.code}`]);
    return fail([`internal error: ${e?.message ?? e}`]);
  }
}

process.exitCode = main(process.argv.slice(2));
