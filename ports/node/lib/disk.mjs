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
import { decodeEscaped, encodeEscaped, reason } from "./wire.mjs";

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

const myUid = process.geteuid(); // whose folders these must be: the effective uid

// A folder of the post office, open. Everything below it is reached through
// its descriptor (/proc/self/fd/N/name: Node has no openat), so a folder swapped
// for a symlink after it was checked is never gone through; names are opened
// with O_NOFOLLOW. `shown` names the folder in messages only.
export class Folder {
  constructor(fd, shown) {
    this.fd = fd;
    this.shown = shown;
  }

  // A real folder (not a link), ours, written by nobody else; null if absent.
  static open(where, shown, { create = false, parent = null } = {}) {
    if (create) {
      try {
        fs.mkdirSync(where, { mode: 0o700 });
        flushFolder(parent, where); // a new folder is flushed into its parent
      } catch (e) {
        if (e.code !== "EEXIST") throw Object.assign(failed(`cannot make ${shown}: ${e.code}`), { errno: e.code });
      }
    }
    let fd;
    try {
      fd = fs.openSync(where, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    } catch (e) {
      if (e.code === "ENOENT") return null;
      if (e.code === "ELOOP" || e.code === "ENOTDIR") {
        const link = fs.lstatSync(where, { throwIfNoEntry: false })?.isSymbolicLink();
        throw failed(link ? `${shown} is a symlink; it is not followed` : `${shown} is not a folder`);
      }
      throw failed(`cannot open ${shown}: ${e.code}`);
    }
    const info = fs.fstatSync(fd);
    const problem = info.uid !== myUid ? `${shown} belongs to uid ${info.uid}, not to us`
      : info.mode & 0o022 ? `${shown} can be written by others (chmod 700 it)` : null;
    if (problem) {
      fs.closeSync(fd);
      throw failed(problem);
    }
    return new Folder(fd, shown);
  }

  // The root of a post office; made (with its parents) when `create`.
  static root(root, { create = false } = {}) {
    if (create) fs.mkdirSync(path.dirname(root), { recursive: true, mode: 0o700 });
    return Folder.open(root, root, { create });
  }

  // The path of a name below this folder, as bytes (a name need not be UTF-8).
  at(name) {
    return Buffer.concat([Buffer.from(`/proc/self/fd/${this.fd}/`), encodeEscaped(name)]);
  }

  child(name, options = {}) {
    return Folder.open(this.at(name), `${this.shown}/${name}`, { ...options, parent: this });
  }

  names() {
    try {
      return fs.readdirSync(`/proc/self/fd/${this.fd}`, { encoding: "buffer" }).map(decodeEscaped);
    } catch (e) {
      throw failed(`cannot list ${this.shown}: ${e.code}`);
    }
  }

  // Letters and records: names ending in .json that do not start with a dot.
  jsonNames() {
    return this.names().filter((n) => n.endsWith(".json") && !n.startsWith(".")).sort();
  }

  // Open an entry for reading, never through a link.
  // → {fd, info} | {missing} | {symlink} | {notFile} | {unreadable}
  entry(name) {
    let fd;
    try {
      fd = fs.openSync(this.at(name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    } catch (e) {
      if (e.code === "ENOENT") return { missing: true };
      if (e.code === "ELOOP") return { symlink: true };
      // A socket, or a device node no driver answers, cannot be opened at all
      // (ENXIO, ENODEV): it is no regular file, like a FIFO, not an unreadable one.
      if (e.code !== "EACCES" && e.code !== "EPERM" && this.standsApart(name)) return { notFile: true };
      return { unreadable: e.code };
    }
    const info = fs.fstatSync(fd);
    if (!info.isFile()) {
      fs.closeSync(fd);
      return { notFile: true };
    }
    return { fd, info };
  }

  // Whether something other than a regular file stands at `name` (never followed).
  standsApart(name) {
    try {
      return !fs.lstatSync(this.at(name)).isFile();
    } catch {
      return false;
    }
  }

  readSmall(name, limit) {
    const found = this.entry(name);
    if (!found.fd) return null;
    try {
      return readBounded(found.fd, limit);
    } catch {
      return null;
    } finally {
      fs.closeSync(found.fd);
    }
  }

  lstat(name, options) {
    try {
      return fs.lstatSync(this.at(name), options);
    } catch (e) {
      if (e.code === "ENOENT") return null;
      throw e;
    }
  }

  // Is `name` still this very file (not unlinked, not replaced)?
  holds(name, info) {
    const now = this.lstat(name);
    return now !== null && now.ino === info.ino && now.dev === info.dev;
  }

  fsync() {
    fs.fsyncSync(this.fd);
  }

  // Create a file exclusively (0600, never through a link) and write it whole, flushed.
  writeNew(name, bytes, flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW) {
    const fd = fs.openSync(this.at(name), flags, 0o600);
    try {
      fs.writeSync(fd, bytes);
      fs.fsyncSync(fd);
    } catch (e) {
      fs.closeSync(fd);
      if (flags & O_EXCL) fs.rmSync(this.at(name), { force: true });
      throw e;
    }
    fs.closeSync(fd);
  }

  // Write a file under a temporary name, flush it, rename it into place, flush the folder.
  writeDurably(tempName, finalName, bytes) {
    this.writeNew(tempName, bytes);
    try {
      fs.renameSync(this.at(tempName), this.at(finalName));
    } catch (e) {
      fs.rmSync(this.at(tempName), { force: true });
      throw e;
    }
    this.fsync();
  }

  close() {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
  }
}

function flushFolder(parent, made) {
  if (parent) return parent.fsync();
  const fd = fs.openSync(path.dirname(made), O_RDONLY | O_DIRECTORY);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

// Open folders for the length of one operation, closed however it ends.
export function within(work) {
  const opened = [];
  const keep = (folder) => (folder && opened.push(folder), folder);
  try {
    return work(keep);
  } finally {
    for (const folder of opened.reverse()) folder.close();
  }
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

// Hold the lock of a mailbox folder: flock on the folder itself, as pi-post
// does. If it was removed while we waited (a sweep), its name now means another
// folder or none: try again, making it when `create`. Closing the folder releases it.
export function lockedChild(parent, name, { create }) {
  for (;;) {
    const folder = parent.child(name, { create });
    if (!folder) return null;
    flock(folder.fd, { wait: true });
    if (parent.holds(name, fs.fstatSync(folder.fd))) return folder;
    folder.close();
  }
}
