// The port against every case of the vectors (src/pipost_conformance/vectors), read
// through their manifest as any port's runner would: no Python involved.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { addressOf, encodeMessage, encodeRecord, parseLetter, parseRecord } from "../lib/wire.mjs";
import { frame } from "../lib/frame.mjs";

const VECTORS = new URL("../../../src/pipost_conformance/vectors/", import.meta.url);
const read = (path) => JSON.parse(fs.readFileSync(new URL(path, VECTORS), "utf8"));
const manifest = read("v1.manifest.json");

// The bytes of a letter or record file, as the manifest's header says.
function bytesOf(input) {
  if ("hex" in input) return Buffer.from(input.hex, "hex");
  if ("text" in input) return Buffer.from(input.text.repeat(input.times ?? 1), "utf8");
  let value = input.json;
  if (input.fill) {
    const [field, text, times] = input.fill;
    value = { ...value, [field]: text.repeat(times) };
  }
  return Buffer.from(JSON.stringify(value), "utf8");
}

const withoutText = ({ text, ...facts }) => facts;
const RECORD_FIELDS = ["v", "address", "sessionId", "name", "cwd", "pid", "pidStart", "startedAt", "lastSeen"];
const known = (record) => Object.fromEntries(RECORD_FIELDS.filter((k) => k in record).map((k) => [k, record[k]]));

// What the port answers, written as an expected file writes it.
const ANSWER = {
  address: (input) => ({ address: addressOf(input.sessionId) }),
  letter: (input) => {
    const parsed = parseLetter(bytesOf(input), input.file_name);
    return parsed.message ? { accepted: parsed.message } : { rejected: withoutText(parsed.rejected) };
  },
  "letter-written": (input) => ({ text: encodeMessage(input.message).toString("utf8") }),
  record: (input) => {
    const record = parseRecord(bytesOf(input), input.file_name);
    return record ? { accepted: known(record) } : { rejected: "skipped" };
  },
  "record-written": (input) => ({ text: encodeRecord(input.record).toString("utf8") }),
};

// A record is skipped, not explained (SPEC 1.3): the reason code is pipost's.
const EXPECTED = {
  record: (expected) => (expected.rejected ? { rejected: "skipped" } : expected),
};

function checkFrame(input, expected) {
  const [header, ...rest] = frame(input.message).split("\n");
  const end = rest.pop();
  assert.ok(header.startsWith("[pi-post]") && end.startsWith("[pi-post]"), "the frame's own lines");
  assert.deepEqual(rest, expected.body_lines);
  for (const text of expected.header_contains) assert.ok(header.includes(text), `header: ${text}`);
  for (const text of expected.end_contains) assert.ok(end.includes(text), `end: ${text}`);
  assert.equal(/s-[0-9a-f]{12}/.test(end), expected.end_names_an_address, "an address in the end line");
}

for (const kind of Object.keys(manifest.kinds)) {
  test(`every ${kind} vector`, async (t) => {
    const cases = manifest.cases.filter((c) => c.kind === kind);
    assert.ok(cases.length > 0, `no ${kind} vectors`);
    for (const { name } of cases) {
      await t.test(name, () => {
        const input = read(`${kind}/${name}.input.json`);
        const expected = read(`${kind}/${name}.expected.json`);
        if (kind === "frame") return checkFrame(input, expected);
        const want = (EXPECTED[kind] ?? ((e) => e))(expected);
        assert.deepEqual(ANSWER[kind](input), want);
      });
    }
  });
}
