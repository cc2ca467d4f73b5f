// The built-in category labels. The labeler adds at most one of them to each received email; an
// email whose label is Junk stays withheld from API keys (see docs/emails.md).

export interface LabelDef {
  id: string;
  name: string;
  color: string;
}

export const BUILTIN_LABELS = {
  Junk: { id: 'lbl_junk', name: 'Junk', color: '#b91c1c' },
  Receipts: { id: 'lbl_receipts', name: 'Receipts', color: '#15803d' },
  Newsletters: { id: 'lbl_newsletters', name: 'Newsletters', color: '#1d4ed8' },
  Notifications: { id: 'lbl_notifications', name: 'Notifications', color: '#7c3aed' },
  Personal: { id: 'lbl_personal', name: 'Personal', color: '#c2410c' },
} as const satisfies Record<string, LabelDef>;

export type CategoryName = keyof typeof BUILTIN_LABELS;

export const CATEGORY_NAMES = Object.keys(BUILTIN_LABELS) as CategoryName[];

export function isCategory(name: string): name is CategoryName {
  return Object.hasOwn(BUILTIN_LABELS, name);
}

/** The labels array of an email row's `label` column. */
export function labelsOf(label: string | null): LabelDef[] {
  return label && isCategory(label) ? [BUILTIN_LABELS[label]] : [];
}
