// The TypeScript MCP SDK's client against a spawned server, driven line by line from pytest
// (tests/integration/test_mcp_ts.py). The packages come from $IKIGAI_AGENTS_DIR (see
// tests/clients/package.json; .ci/run installs them).
//
// argv[2]: JSON [command, ...args] of the server to spawn (its environment: this process's).
// First line out: {"tools": [...], "schemaErrors": [...]} — every input and output schema
// compiled with ajv in strict mode, as JSON Schema 2020-12 and as draft-07.
// Then, per JSON line in ({"name", "arguments"}), one line out: the call's result as the SDK
// returned it ({"isError", "text", "structured"}), or {"thrown": message} when the SDK threw
// (its own output-schema validation included), with "outputErrors": ajv's verdict on
// structuredContent against the tool's output schema (both drafts).
import { createRequire } from "node:module";
import readline from "node:readline";

const require = createRequire(`${process.env.IKIGAI_AGENTS_DIR}/package.json`);
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const Ajv2020 = require("ajv/dist/2020").default;
const AjvDraft07 = require("ajv").default;
const addFormats = require("ajv-formats").default;

function validators() {
  const made = [
    ["2020-12", new Ajv2020({ strict: true, allErrors: true })],
    ["draft-07", new AjvDraft07({ strict: true, allErrors: true })],
  ];
  for (const [, ajv] of made) addFormats(ajv);
  return made;
}

const [command, ...args] = JSON.parse(process.argv[2]);
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "ikigai-ts-test", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();

const compiled = {};
const schemaErrors = [];
for (const tool of tools) {
  compiled[tool.name] = [];
  for (const [kind, schema] of [["input", tool.inputSchema], ["output", tool.outputSchema]]) {
    if (schema === undefined) continue;
    for (const [draft, ajv] of validators()) {
      try {
        const validate = ajv.compile(schema);
        if (kind === "output") compiled[tool.name].push([draft, validate]);
      } catch (error) {
        schemaErrors.push({ tool: tool.name, kind, draft, error: String(error.message || error) });
      }
    }
  }
}
process.stdout.write(JSON.stringify({ tools, schemaErrors }) + "\n");

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const { name, arguments: callArguments } = JSON.parse(line);
  let answer;
  try {
    const result = await client.callTool({ name, arguments: callArguments });
    const text = (result.content || []).map((part) => part.text || "").join("");
    answer = { isError: Boolean(result.isError), text, structured: result.structuredContent ?? null };
    if (!result.isError && result.structuredContent !== undefined) {
      answer.outputErrors = [];
      for (const [draft, validate] of compiled[name] || []) {
        if (!validate(result.structuredContent)) {
          answer.outputErrors.push({ draft, errors: validate.errors });
        }
      }
    }
  } catch (error) {
    answer = { thrown: String(error.message || error) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
await client.close();
