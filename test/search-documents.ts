import { zipSync, strToU8 } from 'fflate';

// Tiny documents made in the test, byte by byte: nothing is downloaded or read from disk.

/** A PDF whose objects are given as dictionaries/streams; offsets in the xref table are exact. */
function assemble(objects: string[], trailerExtra = ''): Buffer {
  let out = '%PDF-1.4\n';
  const offsets: number[] = [];
  objects.forEach((o, i) => {
    offsets.push(Buffer.byteLength(out, 'latin1'));
    out += `${i + 1} 0 obj\n${o}\nendobj\n`;
  });
  const xref = Buffer.byteLength(out, 'latin1');
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R ${trailerExtra}>>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

const stream = (s: string) => `<< /Length ${Buffer.byteLength(s, 'latin1')} >>\nstream\n${s}\nendstream`;
const font = '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>';

/** One page per string, each drawn in Helvetica. */
export function makePdf(...pages: string[]): Buffer {
  const objs = ['<< /Type /Catalog /Pages 2 0 R >>', ''];
  const kids: string[] = [];
  for (const text of pages) {
    const page = objs.length + 1;
    kids.push(`${page} 0 R`);
    objs.push(`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents ${page + 1} 0 R /Resources << /Font << /F1 ${page + 2} 0 R >> >> >>`);
    objs.push(stream(`BT /F1 18 Tf 72 700 Td (${text.replace(/[()\\]/g, '\\$&')}) Tj ET`));
    objs.push(font);
  }
  objs[1] = `<< /Type /Pages /Kids [${kids.join(' ')}] /Count ${pages.length} >>`;
  return assemble(objs);
}

/** A PDF with a standard security handler: readers ask for a password. */
export function encryptedPdf(): Buffer {
  const objs = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>',
    stream('BT ET'),
    `<< /Filter /Standard /V 1 /R 2 /O <${'11'.repeat(32)}> /U <${'22'.repeat(32)}> /P -4 >>`,
  ];
  return assemble(objs, `/Encrypt 5 0 R /ID [<${'ab'.repeat(16)}> <${'ab'.repeat(16)}>] `);
}

/** A page tree claiming a million pages, nested deep, all pointing at one another. */
export function pdfBomb(): Buffer {
  const objs = ['<< /Type /Catalog /Pages 2 0 R >>', '<< /Type /Pages /Kids [3 0 R 3 0 R 3 0 R 3 0 R] /Count 1000000 >>', '<< /Type /Pages /Parent 2 0 R /Kids [2 0 R 3 0 R] /Count 1000000 >>'];
  return assemble(objs);
}

export function makeDocx(...paragraphs: string[]): Buffer {
  const body = paragraphs.map((p) => `<w:p><w:r><w:t>${p.replace(/&/g, '&amp;').replace(/</g, '&lt;')}</w:t></w:r></w:p>`).join('');
  return Buffer.from(
    zipSync({
      '[Content_Types].xml': strToU8('<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>'),
      'word/document.xml': strToU8(`<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>${body}</w:body></w:document>`),
    }),
  );
}

/** A DOCX whose document part inflates to 100 MB of zeros (a few hundred KB zipped). */
export function zipBombDocx(): Buffer {
  return Buffer.from(zipSync({ 'word/document.xml': new Uint8Array(100 * 1024 * 1024) }, { level: 9 }));
}

export const DOCX_TYPE = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
