// Row types of the site analytics tables (migration 0021).

export interface SiteAnalyticsHoursTable {
  publication_id: string;
  hour: string;
  requests: number;
  views: number;
  visitors: number;
  bytes: number;
}

export interface SiteAnalyticsDaysTable {
  publication_id: string;
  day: string;
  visitors: number;
}

export type AnalyticsDimension = 'path' | 'referrer' | 'country' | 'status';

export interface SiteAnalyticsCountsTable {
  publication_id: string;
  hour: string;
  dimension: AnalyticsDimension;
  value: string;
  count: number;
}

export interface SiteAnalyticsSeenTable {
  publication_id: string;
  period: string;
  visitor: string;
}

export interface SiteAnalyticsSaltsTable {
  day: string;
  salt: string;
  created_at: string;
}

declare module '../../db/schema.ts' {
  interface DB {
    site_analytics_hours: SiteAnalyticsHoursTable;
    site_analytics_days: SiteAnalyticsDaysTable;
    site_analytics_counts: SiteAnalyticsCountsTable;
    site_analytics_seen: SiteAnalyticsSeenTable;
    site_analytics_salts: SiteAnalyticsSaltsTable;
  }
}
