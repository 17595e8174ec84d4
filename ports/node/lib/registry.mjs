// The registry: registry/<address>.json, one presence record per session.
import fs from "node:fs";
import { RECORD_LIMIT, addressOf, encodeRecord, isAddress, parseRecord } from "./wire.mjs";
import { Folder, randomHex, within } from "./disk.mjs";

export const STALL_MS = 45_000;

// presence of a record, given a process table {exists(pid), start(pid)}; a start
// that cannot be told (undefined) is no evidence of a reused pid (SPEC 2)
export function presenceOf(record, processes, now) {
  if (record.pid === undefined || !processes.exists(record.pid)) return "offline";
  const start = record.pidStart === undefined ? undefined : processes.start(record.pid);
  if (start !== undefined && start !== record.pidStart) return "offline";
  return now - record.lastSeen > STALL_MS ? "stalled" : "live";
}

const recordIn = (folder, name) => {
  const bytes = folder.readSmall(name, RECORD_LIMIT);
  return bytes === null ? null : parseRecord(bytes, name);
};

export class Registry {
  constructor(root) {
    this.root = root;
  }

  open(keep, { create = false } = {}) {
    const root = keep(Folder.root(this.root, { create }));
    return root && keep(root.child("registry", { create }));
  }

  // The record of an address, or null (absent, a link, or not a valid record).
  read(address) {
    if (!isAddress(address)) return null;
    return within((keep) => {
      const folder = this.open(keep);
      return folder && recordIn(folder, `${address}.json`);
    });
  }

  // Every valid record; what is not one is skipped.
  all() {
    return within((keep) => {
      const folder = this.open(keep);
      if (!folder) return [];
      return folder.jsonNames().filter((n) => isAddress(n.slice(0, -5))).map((n) => recordIn(folder, n)).filter(Boolean);
    });
  }

  write(record) {
    within((keep) => {
      const folder = this.open(keep, { create: true });
      folder.writeDurably(`.${record.address}.${randomHex(4)}.tmp`, `${record.address}.json`, encodeRecord(record));
    });
    return this.read(record.address);
  }

  remove(address) {
    within((keep) => {
      const folder = this.open(keep);
      if (folder) fs.rmSync(folder.at(`${address}.json`), { force: true });
      folder?.fsync();
    });
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
