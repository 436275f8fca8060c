/** The benchmarks' tables on stdout. */

/** Columns up to `leftColumns` are text, aligned left; the rest are figures, aligned right. */
export function printTable(header: string[], rows: string[][], leftColumns: number): void {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => row[column]?.length ?? 0)),
  );
  const line = (row: string[]) =>
    row
      .map((text, column) =>
        column < leftColumns ? text.padEnd(widths[column] ?? 0) : text.padStart(widths[column] ?? 0),
      )
      .join('  ')
      .trimEnd();
  process.stdout.write(`${[header, ...rows].map(line).join('\n')}\n\n`);
}
