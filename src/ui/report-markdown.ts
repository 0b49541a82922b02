/**
 * A report's notes (`--notes file.md`) as HTML: headings, paragraphs, lists, code blocks, block
 * quotes, and inline code, bold, italics and links. Everything else is text, escaped. An image
 * (`![alt](url)`) becomes a link, never an `<img>`: a report makes no request.
 */

/** Text safe inside HTML elements and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Inline Markdown of one escaped-to-be line: code, links, bold, italics. */
function inline(text: string): string {
  const codes: string[] = [];
  let out = text.replace(/`([^`]+)`/g, (_m, code: string) => {
    codes.push(`<code>${escapeHtml(code)}</code>`);
    return `\uE000${codes.length - 1}\uE000`;
  });
  out = escapeHtml(out);
  out = out.replace(/!?\[([^\]]*)\]\(([^)\s]+)\)/g, (_m, label: string, url: string) =>
    /^(https?:|mailto:|#)/i.test(url) ? `<a href="${url}" rel="noreferrer noopener">${label}</a>` : label,
  );
  out = out.replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>").replace(/(^|[^*])\*([^*]+)\*/g, "$1<em>$2</em>");
  return out.replace(/\uE000(\d+)\uE000/g, (_m, i: string) => codes[Number(i)] ?? "");
}

/** `markdown` as HTML. */
export function markdownHtml(markdown: string): string {
  const out: string[] = [];
  const lines = markdown.replace(/\r\n?/g, "\n").split("\n");
  let paragraph: string[] = [];
  let list: { tag: "ul" | "ol"; items: string[] } | null = null;
  const flush = (): void => {
    if (paragraph.length > 0) out.push(`<p>${inline(paragraph.join(" "))}</p>`);
    paragraph = [];
    if (list !== null)
      out.push(`<${list.tag}>${list.items.map((i) => `<li>${inline(i)}</li>`).join("")}</${list.tag}>`);
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    if (/^```/.test(line)) {
      flush();
      const code: string[] = [];
      for (i++; i < lines.length && !/^```/.test(lines[i] ?? ""); i++) code.push(lines[i] ?? "");
      out.push(`<pre><code>${escapeHtml(code.join("\n"))}</code></pre>`);
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
    const numbered = /^\s*\d+[.)]\s+(.*)$/.exec(line);
    if (heading !== null) {
      flush();
      const level = Math.min(6, (heading[1] ?? "#").length + 1);
      out.push(`<h${level}>${inline(heading[2] ?? "")}</h${level}>`);
    } else if (bullet !== null || numbered !== null) {
      const tag = bullet !== null ? "ul" : "ol";
      if (paragraph.length > 0 || (list !== null && list.tag !== tag)) flush();
      list ??= { tag, items: [] };
      list.items.push((bullet ?? numbered)?.[1] ?? "");
    } else if (/^>\s?/.test(line)) {
      flush();
      out.push(`<blockquote>${inline(line.replace(/^>\s?/, ""))}</blockquote>`);
    } else if (line.trim() === "") flush();
    else if (list !== null && /^\s+/.test(line)) list.items[list.items.length - 1] += ` ${line.trim()}`;
    else {
      if (list !== null) flush();
      paragraph.push(line.trim());
    }
  }
  flush();
  return out.join("\n");
}
