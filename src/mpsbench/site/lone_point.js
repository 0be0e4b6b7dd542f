/* mpsbench: a series with a single value (one build measured) drawn as a point labelled with its value
 * in asv's units. A flot plugin, loaded after flot and before asv's scripts; a label that would cover
 * another is left out (hovering the point still shows the value).
 */
(function ($) {
    "use strict";
    var LABEL = "mpsbench-lone-label";

    function only_point(series) {
        var found = null;
        for (var i = 0; i < series.data.length; ++i) {
            var point = series.data[i];
            if (point && point[1] !== null && point[1] !== undefined) {
                if (found !== null) {
                    return null;
                }
                found = point;
            }
        }
        return found;
    }

    function text_of(plot, y) {
        var id = plot.getPlaceholder().attr("id") || "";
        var json = ($.asv && $.asv.main_json) || {};
        if (id.indexOf("summarygrid-") === 0) {
            var benchmark = (json.benchmarks || {})[id.slice("summarygrid-".length)];
            return "one build: " + $.asv.pretty_unit(y, benchmark ? benchmark.unit : "");
        }
        if (id === "main-graph") {
            var axis = plot.getAxes().yaxis;
            var shown = $.asv.parse_hash_string(window.location.hash).location.join("/");
            if ($("#reference").hasClass("active") || !(json.benchmarks || {})[shown]) {
                return axis.tickFormatter(y, axis) + (axis.options.axisLabel ? " " + axis.options.axisLabel : "");
            }
            return $.asv.pretty_unit(y, json.benchmarks[shown].unit);
        }
        return null;  // the overview strip and other small plots: the point alone
    }

    function overlaps(box, boxes) {
        for (var i = 0; i < boxes.length; ++i) {
            var other = boxes[i];
            if (box.left < other.right && other.left < box.right && box.top < other.bottom && other.top < box.bottom) {
                return true;
            }
        }
        return false;
    }

    function label(plot) {
        var placeholder = plot.getPlaceholder();
        placeholder.find("." + LABEL).remove();
        var offset = plot.getPlotOffset();
        var placed = [];
        $.each(plot.getData(), function (i, series) {
            if (!series.mpsbenchLone) {
                return;
            }
            var text = text_of(plot, series.mpsbenchLone[1]);
            if (text === null) {
                return;
            }
            var at = plot.pointOffset({x: series.mpsbenchLone[0], y: series.mpsbenchLone[1],
                                       xaxis: series.xaxis.n, yaxis: series.yaxis.n});
            var div = $("<div>").addClass(LABEL).text(text).css({
                position: "absolute", "font-size": "11px", "white-space": "nowrap", color: series.color,
                "pointer-events": "none"
            }).appendTo(placeholder);
            var width = div.outerWidth(), height = div.outerHeight();
            var left = Math.max(offset.left, Math.min(at.left - width / 2, placeholder.width() - width - 2));
            var tops = [at.top + 8, at.top - height - 8];  // below the point first, where there is room
            if (at.top >= placeholder.height() / 2) {
                tops.reverse();
            }
            for (var k = 0; k < tops.length; ++k) {
                var box = {left: left, right: left + width, top: tops[k], bottom: tops[k] + height};
                var inside = box.top >= offset.top && box.bottom <= offset.top + plot.height();
                if (inside && !overlaps(box, placed)) {
                    placed.push(box);
                    div.css({left: left, top: tops[k]});
                    return;
                }
            }
            div.remove();
        });
    }

    $.plot.plugins.push({
        name: "mpsbench-lone-point",
        version: "1.0",
        options: {},
        init: function (plot) {
            plot.hooks.processRawData.push(function (plot, series) {
                series.mpsbenchLone = only_point(series);
                if (series.mpsbenchLone) {
                    series.points.show = true;
                    series.points.radius = 4;
                    series.points.fill = 1;
                    series.points.fillColor = null;  // the series' own colour
                }
            });
            plot.hooks.draw.push(label);
        }
    });
})(jQuery);
