/** A time-series chart drawn by uPlot (a small, well-kept charting library), sized to its box. */
import uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'
import { useEffect, useRef } from 'preact/hooks'

export interface ChartSeries {
  label: string
  color: string
  values: (number | null)[]
}

/** `times`: Unix seconds of each point. */
export function TimeChart({ times, series, title }: { times: number[]; series: ChartSeries[]; title: string }) {
  const box = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const element = box.current
    if (!element) return
    const options: uPlot.Options = {
      title,
      width: Math.max(280, element.clientWidth),
      height: 240,
      series: [{}, ...series.map((line) => ({ label: line.label, stroke: line.color, width: 2, points: { show: times.length < 40 } }))],
      axes: [{}, { size: 50 }],
      scales: { y: { range: (_chart, _min, max) => [0, Math.max(1, max)] } },
    }
    const chart = new uPlot(options, [times, ...series.map((line) => line.values)] as uPlot.AlignedData, element)
    const resize = new ResizeObserver(() => chart.setSize({ width: Math.max(280, element.clientWidth), height: 240 }))
    resize.observe(element)
    return () => {
      resize.disconnect()
      chart.destroy()
    }
  }, [times, series, title])
  return <div class="chart" ref={box} role="img" aria-label={title} />
}
