// A real OpenID Connect provider for the tests (oidc-provider, the certified Node library),
// with its development login form: people and their groups come from PEOPLE (JSON:
// {"login": {"email": ..., "groups": [...]}}), which the test may rewrite between sign-ins.
// Usage: node provider.mjs PORT REDIRECT_URI PEOPLE_FILE
import { readFileSync } from "node:fs";
import Provider from "oidc-provider";

const [port, redirect, peopleFile] = process.argv.slice(2);
const people = () => JSON.parse(readFileSync(peopleFile, "utf8"));

const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: [{
    client_id: "gpuloans", client_secret: "test-secret",
    redirect_uris: [redirect], response_types: ["code"], grant_types: ["authorization_code"],
    id_token_signed_response_alg: "RS256",
  }],
  claims: { openid: ["sub"], email: ["email"], profile: ["name"], groups: ["groups"] },
  scopes: ["openid", "email", "profile", "groups"],
  features: { devInteractions: { enabled: true } },
  pkce: { required: () => false },
  async findAccount(ctx, id) {
    const person = people()[id];
    if (!person) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, email: person.email, name: person.name || id,
                 groups: person.groups };
      },
    };
  },
});
provider.proxy = false;
provider.listen(Number(port), "127.0.0.1", () => console.log("listening"));
