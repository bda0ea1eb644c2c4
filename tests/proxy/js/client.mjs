// The TypeScript SDK client driven by tests/proxy/test_ts_client.py.
// Usage: node client.mjs '<json>' where json is {"command": ..., "args": [...], "calls": [[name, arguments], ...]}.
// With "readLinks": false in the json, links are not read (links then stays empty).
// An argument given as "$last_link" is replaced by the URI of the last store resource_link received.
// Prints {"tools": [...names], "results": [...], "links": {uri: sha256 of every window read in turn}}.
import { createHash } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const spec = JSON.parse(process.argv[2]);
const client = new Client({ name: "proxy-ts-test", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command: spec.command, args: spec.args, stderr: "inherit" }));

const tools = (await client.listTools()).tools.map((t) => t.name);
const results = [];
const links = {};
let lastLink = null;
for (const [name, args] of spec.calls) {
  const filled = Object.fromEntries(Object.entries(args).map(([k, v]) => [k, v === "$last_link" ? lastLink : v]));
  const result = await client.callTool({ name, arguments: filled });
  results.push(result);
  for (const block of result.content) {
    if (block.type !== "resource_link" || !block.uri.startsWith("blobstore://")) continue;
    lastLink = block.uri;
    if (spec.readLinks === false) continue;
    const hash = createHash("sha256");
    let next = `${block.uri}?offset=0&length=1048576`;
    while (next) {
      const read = await client.readResource({ uri: next });
      const contents = read.contents[0];
      hash.update(Buffer.from(contents.blob, "base64"));
      next = contents._meta["dev.blobstore/window"].next;
    }
    links[block.uri] = hash.digest("hex");
  }
}
await client.close();
process.stdout.write(JSON.stringify({ tools, results, links }));
