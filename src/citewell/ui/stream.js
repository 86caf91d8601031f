// Server-sent events read from a fetch() body. EventSource cannot be used: it only sends GET
// requests and cannot carry the Authorization header, and an answer is a POST.

/** The `data` of each event of an SSE body, as it arrives, parsed as JSON. The Responses API
 * sends one JSON object per event and names the event inside it (`type`), so the `event:`
 * lines are not needed. */
export async function* sseJson(body) {
  for await (const data of sseData(body)) yield JSON.parse(data);
}

async function* sseData(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let unfinished = ""; // a line cut by the end of a network chunk, completed by the next one
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    const lines = (unfinished + value).split(/\r\n|\r|\n/);
    unfinished = lines.pop();
    for (const line of lines) {
      if (line === "") {
        // A blank line ends an event.
        if (data.length) yield data.join("\n");
        data = [];
      } else if (line.startsWith("data:")) {
        data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
      }
      // Other fields (event:, id:, retry:) and comments (":") are not needed here.
    }
  }
}
