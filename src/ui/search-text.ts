/** The dashboard's search boxes' matching, shared with a report's key filter (report.ts). */

/** A search box's text as a case-insensitive regular expression; a text that is no valid regex matches as plain text. */
export function searchMatcher(text: string): { test: (s: string) => boolean; error: string | null } {
  const q = text.trim();
  if (q === "") return { test: () => true, error: null };
  try {
    const re = new RegExp(q, "iu");
    return { test: (s) => re.test(s), error: null };
  } catch (error) {
    const lower = q.toLowerCase();
    return {
      test: (s) => s.toLowerCase().includes(lower),
      error: error instanceof Error ? error.message : String(error),
    };
  }
}
