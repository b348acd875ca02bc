// What the API modules share: splitting a streamed text, pauses, token estimates.

// `text` in at most n pieces (at least one, possibly empty), so that every stream carries
// several deltas for the CLI to join.
export function chunks(text, n) {
  const size = Math.max(1, Math.ceil(text.length / n));
  const out = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out.length ? out : [''];
}

export function sleep(ms) {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}

// Input tokens of a request when the step does not say: about four bytes a token.
export function estimateTokens(bytes) {
  return Math.ceil(bytes / 4);
}
