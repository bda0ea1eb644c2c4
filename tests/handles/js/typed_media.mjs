// The TypeScript SDK client against the typed media example (tests/handles/test_media_ts_client.py).
// Usage: node typed_media.mjs '<json>', json being {"command": ..., "args": [...], "samples": [...], "calls": [[name, arguments], ...]}.
// Every tool's inputSchema and outputSchema is compiled by the SDK's own validator (AjvJsonSchemaValidator) and by
// Ajv in its JSON Schema 2020-12 mode with strict checks of the schema itself; each sample is validated against each
// typed media parameter; each call goes through the SDK client, which checks structuredContent against the
// tool's outputSchema itself. Prints {"schemas": {tool: {...}}, "results": [...]}; any failure exits non-zero.
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";

const spec = JSON.parse(process.argv[2]);
const client = new Client({ name: "typed-media-ts-test", version: "1.0.0" });
await client.connect(
  new StdioClientTransport({ command: spec.command, args: spec.args, env: spec.env, stderr: "inherit" }),
);

const sdk = new AjvJsonSchemaValidator();
// strictTypes off: JSON Schema lets `type` be left out where `anyOf` branches give it; unknown keywords are allowed
// as annotations (x-blobstore-media, x-mcp-file), as 2020-12 says.
const strict = new Ajv2020({ strict: true, strictTypes: false, strictRequired: false, allowMatchingProperties: true });
addFormats(strict);
for (const keyword of ["x-blobstore-file", "x-blobstore-media", "x-mcp-file"]) {
  if (!strict.getKeyword(keyword)) strict.addKeyword(keyword);
}

const schemas = {};
for (const tool of (await client.listTools()).tools) {
  const seen = { input: strict.validateSchema(tool.inputSchema), typed: {} };
  strict.compile(tool.inputSchema);
  sdk.getValidator(tool.inputSchema);
  if (tool.outputSchema) {
    seen.output = strict.validateSchema(tool.outputSchema);
    strict.compile(tool.outputSchema);
    sdk.getValidator(tool.outputSchema);
  }
  for (const [name, node] of Object.entries(tool.inputSchema.properties ?? {})) {
    if (!node["x-blobstore-media"]) continue;
    const one = { type: "object", properties: { [name]: node } };
    const bySdk = sdk.getValidator(one);
    const byStrict = strict.compile(one);
    seen.typed[name] = spec.samples.map((value) => bySdk({ [name]: value }).valid && byStrict({ [name]: value }));
  }
  schemas[tool.name] = seen;
}
const results = [];
for (const [name, args] of spec.calls) {
  results.push(await client.callTool({ name, arguments: args }));
}
await client.close();
process.stdout.write(JSON.stringify({ schemas, results }));
