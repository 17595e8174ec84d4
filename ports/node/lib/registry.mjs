// The registry: registry/<address>.json, one presence record per session.
import fs from "node:fs";
import path from "node:path";
import { RECORD_LIMIT, addressOf, encodeRecord, isAddress, parseRecord } from "./wire.mjs";
import { checkFolder, ensureFolder, randomHex, readSmallFile, writeDurably } from "./disk.mjs";

export const BEAT_MS = 30_000;
export const STALL_MS = 45_000;

// presence of a record, given a process table {exists(pid), start(pid)}
export function presenceOf(record, processes, now) {
  if (record.pid === undefined || !processes.exists(record.pid)) return "offline";
  if (record.pidStart !== undefined && record.pidStart !== processes.start(record.pid)) return "offline";
  return now - record.lastSeen > STALL_MS ? "stalled" : "live";
}

export class Registry {
  constructor(root) {
    this.root = root;
    this.folder = path.join(root, "registry");
  }

  // The record of an address, or null (absent, a link, or not a valid record).
  read(address) {
    if (!isAddress(address) || !checkFolder(this.folder)) return null;
    const name = `${address}.json`;
    const bytes = readSmallFile(path.join(this.folder, name), RECORD_LIMIT);
    return bytes === null ? null : parseRecord(bytes, name);
  }

  // Every valid record; what is not one is skipped.
  all() {
    if (!checkFolder(this.folder)) return [];
    const found = [];
    for (const name of fs.readdirSync(this.folder).sort()) {
      if (!name.endsWith(".json") || name.startsWith(".") || !isAddress(name.slice(0, -5))) continue;
      const bytes = readSmallFile(path.join(this.folder, name), RECORD_LIMIT);
      const record = bytes === null ? null : parseRecord(bytes, name);
      if (record) found.push(record);
    }
    return found;
  }

  write(record) {
    fs.mkdirSync(this.root, { recursive: true, mode: 0o700 });
    checkFolder(this.root);
    ensureFolder(this.folder);
    writeDurably(this.folder, `.${record.address}.${randomHex(4)}.tmp`, `${record.address}.json`, encodeRecord(record));
    return this.read(record.address);
  }

  remove(address) {
    fs.rmSync(path.join(this.folder, `${address}.json`), { force: true });
  }

  register({ sessionId, name, cwd, pid, pidStart, now }) {
    const address = addressOf(sessionId);
    return this.write({ address, sessionId, name, cwd, pid, pidStart, startedAt: now, lastSeen: now });
  }

  heartbeat(record, now) {
    return this.write({ ...record, lastSeen: now });
  }

  // Offline, but kept: the session stays addressable while it is down.
  shutdown(record, now) {
    const { pid, pidStart, ...kept } = record;
    return this.write({ ...kept, lastSeen: now });
  }
}
