/**
 * Test helper: an in-memory span exporter (`@opentelemetry/sdk-trace-base`) and the spans it
 * holds reduced to small trees (name, attributes, event names, children).
 */
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';

export interface SpanNode {
  readonly name: string;
  readonly attributes: Record<string, unknown>;
  readonly events: string[];
  readonly children: SpanNode[];
}

export function createSpanRecorder() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const spans = (): ReadableSpan[] => exporter.getFinishedSpans();
  /** The finished spans as trees, children in start order (ties: in end order). */
  const trees = (): SpanNode[] => {
    const all = spans();
    const ids = new Set(all.map((span) => span.spanContext().spanId));
    const toNode = (span: ReadableSpan): SpanNode => ({
      name: span.name,
      attributes: { ...span.attributes },
      events: span.events.map((event) => event.name),
      children: all
        .filter((child) => child.parentSpanContext?.spanId === span.spanContext().spanId)
        .sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1])
        .map(toNode),
    });
    return all
      .filter(
        (span) => span.parentSpanContext === undefined || !ids.has(span.parentSpanContext.spanId),
      )
      .map(toNode);
  };
  return { provider, tracer: provider.getTracer('test'), exporter, spans, trees };
}
