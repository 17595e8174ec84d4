// The file system, thinly: checked folders, files opened without following
// links, bounded reads, durable writes, and flock(2) through flock(1).
//
// Node's standard library has no flock. flock(1) from util-linux locks a file
// descriptor it inherits; the lock belongs to the open file description, which
// this process keeps after the child exits. So the lock is the kernel's flock
// on the same inode pi-post 0.7 and pipost lock, it is dropped when this
// process closes the descriptor or dies, and it costs one short child process.
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { reason } from "./wire.mjs";

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY } = fs.constants;

export class Refused extends Error {
  constructor(reasonValue) {
    super(reasonValue.text);
    this.reason = reasonValue;
  }
}

// The disk failed an operation, or holds something we will not go through.
export class Failed extends Error {
  constructor(reasonValue) {
    super(reasonValue.text);
    this.reason = reasonValue;
  }
}

export const failed = (text, facts = {}, code = "io_error") => new Failed(reason(code, text, facts));

const myUid = process.getuid();

// A folder of ours: a real folder (not a link), owned by us, written by nobody else.
// Returns false when it does not exist; throws Failed when it cannot be trusted.
export function checkFolder(where) {
  let info;
  try {
    info = fs.lstatSync(where);
  } catch (e) {
    if (e.code === "ENOENT") return false;
    throw failed(`cannot look at ${where}: ${e.code}`);
  }
  if (info.isSymbolicLink()) throw failed(`${where} is a symlink; it is not followed`);
  if (!info.isDirectory()) throw failed(`${where} is not a folder`);
  if (info.uid !== myUid) throw failed(`${where} belongs to uid ${info.uid}, not to us`);
  if (info.mode & 0o022) throw failed(`${where} can be written by others (chmod 700 it)`);
  return true;
}

export function ensureFolder(where) {
  if (checkFolder(where)) return;
  try {
    fs.mkdirSync(where, { mode: 0o700 });
  } catch (e) {
    if (e.code !== "EEXIST") throw failed(`cannot make ${where}: ${e.code}`);
  }
  checkFolder(where);
}

// Letters and records: names ending in .json that do not start with a dot.
export function jsonNames(folder) {
  let names;
  try {
    names = fs.readdirSync(folder);
  } catch (e) {
    if (e.code === "ENOENT") return [];
    throw failed(`cannot list ${folder}: ${e.code}`);
  }
  return names.filter((n) => n.endsWith(".json") && !n.startsWith(".")).sort();
}

// Up to `limit + 1` bytes of an open file: enough to know it is too large.
export function readBounded(fd, limit) {
  const buffer = Buffer.alloc(limit + 1);
  let filled = 0;
  while (filled < buffer.length) {
    const got = fs.readSync(fd, buffer, filled, buffer.length - filled, null);
    if (got === 0) break;
    filled += got;
  }
  return buffer.subarray(0, filled);
}

// Open a file of the post office for reading, never through a link.
// → {fd, info} | {missing} | {symlink} | {notFile} | {unreadable}
export function openEntry(where) {
  let fd;
  try {
    fd = fs.openSync(where, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (e) {
    if (e.code === "ENOENT") return { missing: true };
    if (e.code === "ELOOP") return { symlink: true };
    return { unreadable: e.code };
  }
  const info = fs.fstatSync(fd);
  if (!info.isFile()) {
    fs.closeSync(fd);
    return { notFile: true };
  }
  return { fd, info };
}

export function readSmallFile(where, limit) {
  const entry = openEntry(where);
  if (!entry.fd) return null;
  try {
    return readBounded(entry.fd, limit);
  } catch {
    return null;
  } finally {
    fs.closeSync(entry.fd);
  }
}

export function fsyncFolder(where) {
  const fd = fs.openSync(where, O_RDONLY | O_DIRECTORY);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

// Write a file whole under a temporary name, flush it, rename it into place.
export function writeDurably(folder, tempName, finalName, bytes) {
  const temp = path.join(folder, tempName);
  const fd = fs.openSync(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
  try {
    fs.writeSync(fd, bytes);
    fs.fsyncSync(fd);
  } catch (e) {
    fs.closeSync(fd);
    fs.rmSync(temp, { force: true });
    throw e;
  }
  fs.closeSync(fd);
  fs.renameSync(temp, path.join(folder, finalName));
  fsyncFolder(folder);
}

export const randomHex = (bytes) => randomBytes(bytes).toString("hex");

// flock(2) on an open descriptor, through flock(1). Returns whether it was taken.
export function flock(fd, { wait }) {
  const args = ["-x", ...(wait ? [] : ["-n"]), "3"];
  const run = spawnSync("flock", args, { stdio: ["ignore", "ignore", "pipe", fd] });
  if (run.error) throw failed(`cannot lock: flock(1) did not run (${run.error.code}); pi-post-node needs util-linux`);
  if (run.status === 0) return true;
  if (!wait && run.status === 1) return false;
  throw failed(`cannot lock: flock(1) said ${String(run.stderr).trim() || `exit status ${run.status}`}`);
}

// Hold the lock of a folder (the mailbox lock: flock on the folder itself, as
// pi-post does). If the folder was removed while we waited (a sweep), its name
// now means another folder or none: try again, making it when `create`.
export function lockFolder(where, { create }) {
  for (;;) {
    if (create) ensureFolder(where);
    else if (!checkFolder(where)) return null;
    let fd;
    try {
      fd = fs.openSync(where, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    } catch (e) {
      if (e.code === "ENOENT") continue;
      throw failed(`cannot open ${where}: ${e.code}`);
    }
    flock(fd, { wait: true });
    const held = fs.fstatSync(fd);
    let now = null;
    try {
      now = fs.lstatSync(where);
    } catch {}
    if (now && now.ino === held.ino && now.dev === held.dev) return { fd, release: () => fs.closeSync(fd) };
    fs.closeSync(fd);
  }
}
