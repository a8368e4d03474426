package dev.lakejoin.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import org.apache.paimon.Snapshot;
import org.apache.paimon.catalog.Catalog;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.catalog.CatalogFactory;
import org.apache.paimon.catalog.Identifier;
import org.apache.paimon.data.BinaryRow;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.disk.IOManager;
import org.apache.paimon.options.ExpireConfig;
import org.apache.paimon.options.Options;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.schema.Schema;
import org.apache.paimon.schema.SchemaChange;
import org.apache.paimon.table.DataTable;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.Table;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.source.DataSplit;
import org.apache.paimon.table.source.EndOfScanException;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.table.source.Split;
import org.apache.paimon.table.source.StreamTableScan;
import org.apache.paimon.table.source.TableRead;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DataTypeJsonParser;
import org.apache.paimon.types.RowKind;
import org.apache.paimon.types.RowType;

/**
 * The Java Paimon oracle: Apache Paimon's reference implementation behind a command line, so
 * the Rust tests can check lakejoin's tables against it (reading what lakejoin wrote, writing
 * what lakejoin reads). One command per process; JSON lines on stdin and stdout.
 */
public final class Oracle {
    static final String USAGE = String.join("\n",
            "usage: java -jar oracle.jar COMMAND WAREHOUSE DB.TABLE [ARGS]",
            "",
            "Apache Paimon (the reference implementation) on a filesystem catalog at WAREHOUSE.",
            "Rows are JSON objects, one a line, in and out; fields in schema order.",
            "",
            "commands:",
            "  read WAREHOUSE DB.TABLE [--snapshot N]",
            "      the merged table (at snapshot N), sorted by primary key (all columns if none)",
            "  read-incremental WAREHOUSE DB.TABLE FROM TO",
            "      the changes after snapshot FROM up to TO ('incremental-between'), each row",
            "      with \"_rowkind\" first (+I -U +U -D); sorted by primary key, and a key's",
            "      changes in commit order (read snapshot by snapshot)",
            "  audit-log WAREHOUSE DB.TABLE",
            "      the DB.TABLE$audit_log system table (its \"rowkind\" column first), sorted",
            "      by primary key, stable",
            "  stream WAREHOUSE DB.TABLE [--from-snapshot N [--full]] [--max-rows K] [--timeout-ms T]",
            "      a streaming scan: the changes from snapshot N on (N included; with --full the",
            "      whole table at N first; without N, Paimon's default: the latest snapshot in",
            "      full, then changes), with \"_rowkind\", each plan sorted by primary key, until",
            "      K rows (default: no limit) or T ms (default 5000) without a new row",
            "  create WAREHOUSE DB.TABLE [--ignore-if-exists]     spec on stdin:",
            "      {\"columns\": [[\"id\", \"INT NOT NULL\"], ...], \"primary_keys\": [...],",
            "       \"partition_keys\": [...], \"options\": {\"bucket\": \"2\", ...}, \"comment\": \"...\"}",
            "      types in Paimon's SQL syntax (its own parser: atomic types only, e.g.",
            "      DECIMAL(10, 2), VARCHAR(20), TIMESTAMP(3) WITH LOCAL TIME ZONE, ... NOT NULL);",
            "      the database is created if missing",
            "  schema WAREHOUSE DB.TABLE",
            "      the table as a create spec (plus \"schema_id\")",
            "  write WAREHOUSE DB.TABLE [--option KEY=VALUE ...]",
            "      rows on stdin, each with an optional \"_rowkind\" (+I default, -U, +U, -D), all",
            "      in one batch commit (dynamic options through table.copy); prints the latest",
            "      snapshot id afterwards (a write may also commit a compaction)",
            "  compact WAREHOUSE DB.TABLE [--full] [--option KEY=VALUE ...]",
            "      compacts every partition and bucket that a scan finds, in one commit (full, or",
            "      as Paimon's compaction strategy picks without --full); prints the latest snapshot id",
            "  expire WAREHOUSE DB.TABLE --retain-max N [--retain-min M]",
            "      expires snapshots beyond the newest N (keeping at least M, default 1, and no",
            "      time limit); prints how many were expired",
            "  alter WAREHOUSE DB.TABLE add-column NAME TYPE | add-column-first NAME TYPE |",
            "        widen-column NAME TYPE | drop-column NAME | rename-column NAME NEW |",
            "        move-column NAME first | move-column NAME after OTHER |",
            "        set-option KEY VALUE | remove-option KEY",
            "      one schema change (widen-column keeps the column's nullability)",
            "  snapshots WAREHOUSE DB.TABLE",
            "      one line per snapshot: id, schemaId, commitKind, totalRecordCount,",
            "      deltaRecordCount, changelogRecordCount, properties, timeMillis, commitIdentifier",
            "",
            "values:",
            "  TINYINT SMALLINT INT BIGINT    JSON integers",
            "  FLOAT DOUBLE                   JSON numbers; non-finite ones as \"NaN\", \"Infinity\", \"-Infinity\"",
            "  BOOLEAN                        true / false",
            "  DECIMAL(p,s)                   a string, plain, with exactly s decimals (\"12.50\");",
            "                                 in: a string or a number, never rounded",
            "  CHAR VARCHAR STRING            strings",
            "  BINARY VARBINARY BYTES         lowercase hex strings (in: either case)",
            "  DATE                           days since 1970-01-01 (in: also \"yyyy-MM-dd\")",
            "  TIME(p)                        milliseconds of the day",
            "  TIMESTAMP(p), TIMESTAMP(p) WITH LOCAL TIME ZONE",
            "                                 \"yyyy-MM-ddTHH:mm:ss\", then, if the nanoseconds are not",
            "                                 0, '.' and their 9 digits less trailing zeros (whatever",
            "                                 p is); LTZ values as the UTC wall clock, no zone suffix;",
            "                                 in: that form, a space for the T allowed",
            "  ARRAY / MAP / ROW              JSON arrays / arrays of [key, value] pairs (in: also an",
            "                                 object for string keys) / objects",
            "  NULL                           null (in: a missing field is null too)",
            "",
            "Errors: one line on stderr and exit code 1 (ORACLE_DEBUG=1 adds the stack trace).",
            "Logs go to stderr at WARN.");

    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final String ROWKIND = "_rowkind";

    private final PrintStream out;

    private Oracle(PrintStream out) {
        this.out = out;
    }

    public static void main(String[] args) {
        PrintStream out = new PrintStream(
                new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16),
                false, StandardCharsets.UTF_8);
        // stdout is data: whatever a library prints there goes to stderr instead.
        System.setOut(System.err);
        int code = 0;
        try {
            new Oracle(out).run(args);
        } catch (Usage e) {
            System.err.println("oracle: " + e.getMessage() + " (see: java -jar oracle.jar --help)");
            code = 1;
        } catch (Throwable e) {
            System.err.println("oracle: error: " + oneLine(e));
            if (System.getenv("ORACLE_DEBUG") != null) {
                e.printStackTrace(System.err);
            }
            code = 1;
        }
        out.flush();
        System.err.flush();
        System.exit(code);
    }

    /** A bad command line. */
    static final class Usage extends RuntimeException {
        Usage(String message) {
            super(message);
        }
    }

    /** An error of ours, whose message is all there is to say. */
    static final class Failure extends RuntimeException {
        Failure(String message) {
            super(message);
        }
    }

    static String oneLine(Throwable e) {
        StringBuilder text = new StringBuilder();
        Set<Throwable> seen = Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        String last = null;
        for (Throwable c = e; c != null && seen.add(c); c = c.getCause()) {
            String message = c instanceof Failure || c instanceof IllegalArgumentException
                    ? Objects.toString(c.getMessage(), c.getClass().getSimpleName())
                    : c.getClass().getSimpleName() + (c.getMessage() == null ? "" : ": " + c.getMessage());
            if (last != null && last.contains(Objects.toString(c.getMessage(), "\0"))) {
                continue;
            }
            text.append(text.length() == 0 ? "" : "; caused by ").append(message);
            last = message;
        }
        return text.toString().replaceAll("\\s*[\\r\\n]+\\s*", " ");
    }

    /** The positional arguments and --options of one command. */
    private static final class Args {
        final List<String> positional = new ArrayList<>();
        final Map<String, List<String>> options = new LinkedHashMap<>();
        final Set<String> flags = new LinkedHashSet<>();

        static Args parse(List<String> args, Set<String> valued, Set<String> flagNames) {
            Args a = new Args();
            for (int i = 0; i < args.size(); i++) {
                String arg = args.get(i);
                if (arg.startsWith("--") && arg.length() > 2) {
                    String name = arg;
                    String value = null;
                    int eq = arg.indexOf('=');
                    if (eq > 0 && valued.contains(arg.substring(0, eq))) {
                        name = arg.substring(0, eq);
                        value = arg.substring(eq + 1);
                    }
                    if (valued.contains(name)) {
                        if (value == null) {
                            if (i + 1 >= args.size()) {
                                throw new Usage(name + " needs a value");
                            }
                            value = args.get(++i);
                        }
                        a.options.computeIfAbsent(name, k -> new ArrayList<>()).add(value);
                    } else if (flagNames.contains(name)) {
                        a.flags.add(name);
                    } else {
                        throw new Usage("unknown option " + arg);
                    }
                } else {
                    a.positional.add(arg);
                }
            }
            return a;
        }

        String one(String name) {
            List<String> values = options.get(name);
            if (values == null) {
                return null;
            }
            if (values.size() > 1) {
                throw new Usage(name + " given more than once");
            }
            return values.get(0);
        }

        long number(String name, long fallback) {
            String value = one(name);
            if (value == null) {
                return fallback;
            }
            try {
                return Long.parseLong(value);
            } catch (NumberFormatException e) {
                throw new Usage(name + " needs a number, not " + value);
            }
        }

        Map<String, String> keyValues(String name) {
            Map<String, String> out = new LinkedHashMap<>();
            for (String kv : options.getOrDefault(name, List.of())) {
                int eq = kv.indexOf('=');
                if (eq <= 0) {
                    throw new Usage(name + " needs KEY=VALUE, not " + kv);
                }
                out.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
            return out;
        }

        void expect(int count, String shape) {
            if (positional.size() != count) {
                throw new Usage("expected " + shape);
            }
        }
    }

    private void run(String[] argv) throws Exception {
        if (argv.length == 1 && (argv[0].equals("--help") || argv[0].equals("-h") || argv[0].equals("help"))) {
            out.println(USAGE);
            return;
        }
        if (argv.length < 3) {
            throw new Usage("expected COMMAND WAREHOUSE DB.TABLE");
        }
        String command = argv[0];
        String warehouse = argv[1];
        Identifier id = identifier(argv[2]);
        List<String> rest = List.of(argv).subList(3, argv.length);
        try (Catalog catalog = catalog(warehouse)) {
            switch (command) {
                case "read":
                    read(catalog, id, Args.parse(rest, Set.of("--snapshot"), Set.of()));
                    break;
                case "read-incremental":
                    readIncremental(catalog, id, Args.parse(rest, Set.of(), Set.of()));
                    break;
                case "audit-log":
                    auditLog(catalog, id, Args.parse(rest, Set.of(), Set.of()));
                    break;
                case "stream":
                    stream(catalog, id, Args.parse(rest,
                            Set.of("--from-snapshot", "--max-rows", "--timeout-ms"), Set.of("--full")));
                    break;
                case "create":
                    create(catalog, id, Args.parse(rest, Set.of(), Set.of("--ignore-if-exists")));
                    break;
                case "schema":
                    schema(catalog, id, Args.parse(rest, Set.of(), Set.of()));
                    break;
                case "write":
                    write(catalog, id, Args.parse(rest, Set.of("--option"), Set.of()));
                    break;
                case "compact":
                    compact(catalog, id, Args.parse(rest, Set.of("--option"), Set.of("--full")));
                    break;
                case "expire":
                    expire(catalog, id, Args.parse(rest, Set.of("--retain-max", "--retain-min"), Set.of()));
                    break;
                case "alter":
                    alter(catalog, id, Args.parse(rest, Set.of(), Set.of()));
                    break;
                case "snapshots":
                    snapshots(catalog, id, Args.parse(rest, Set.of(), Set.of()));
                    break;
                default:
                    throw new Usage("unknown command " + command);
            }
        }
    }

    private static Catalog catalog(String warehouse) {
        String location = warehouse.contains("://") ? warehouse : Paths.get(warehouse).toAbsolutePath().toString();
        Options options = new Options();
        options.set("warehouse", location);
        options.set("metastore", "filesystem");
        return CatalogFactory.createCatalog(CatalogContext.create(options));
    }

    private static Identifier identifier(String name) {
        int dot = name.indexOf('.');
        if (dot <= 0 || dot == name.length() - 1 || name.indexOf('.', dot + 1) >= 0) {
            throw new Usage("expected DB.TABLE, not " + name);
        }
        return Identifier.create(name.substring(0, dot), name.substring(dot + 1));
    }

    // ---------------------------------------------------------------- reading

    private void read(Catalog catalog, Identifier id, Args args) throws Exception {
        args.expect(0, "read WAREHOUSE DB.TABLE [--snapshot N]");
        Table table = catalog.getTable(id);
        String snapshot = args.one("--snapshot");
        if (snapshot != null) {
            args.number("--snapshot", 0);
            table = table.copy(Map.of("scan.snapshot-id", snapshot));
        }
        printSorted(table, table.primaryKeys(), false);
    }

    private void readIncremental(Catalog catalog, Identifier id, Args args) throws Exception {
        args.expect(2, "read-incremental WAREHOUSE DB.TABLE FROM TO");
        long from = snapshotId(args.positional.get(0));
        long to = snapshotId(args.positional.get(1));
        Table table = catalog.getTable(id);
        // The whole range once, for Paimon's own checks of it (and their error messages).
        table.copy(Map.of("incremental-between", from + "," + to)).newReadBuilder().newScan().plan();
        // Then snapshot by snapshot, the same changes: a key changed in several snapshots is
        // then in commit order, which one read of the whole range does not keep.
        List<ObjectNode> rows = new ArrayList<>();
        RowType type = table.rowType();
        for (long snapshot = from + 1; snapshot <= to; snapshot++) {
            Table one = table.copy(Map.of("incremental-between", (snapshot - 1) + "," + snapshot));
            ReadBuilder builder = one.newReadBuilder();
            rows.addAll(readRows(builder, builder.newRead(), builder.newScan().plan().splits(), true));
        }
        rows.sort(Rows.order(type, table.primaryKeys()));
        for (ObjectNode row : rows) {
            out.println(MAPPER.writeValueAsString(row));
        }
    }

    private void auditLog(Catalog catalog, Identifier id, Args args) throws Exception {
        args.expect(0, "audit-log WAREHOUSE DB.TABLE");
        List<String> keys = catalog.getTable(id).primaryKeys();
        Table auditLog = catalog.getTable(
                Identifier.create(id.getDatabaseName(), id.getObjectName() + "$audit_log"));
        printSorted(auditLog, keys, false);
    }

    private void printSorted(Table table, List<String> keys, boolean withKind) throws Exception {
        ReadBuilder builder = table.newReadBuilder();
        List<Split> splits = builder.newScan().plan().splits();
        List<ObjectNode> rows = readRows(builder, builder.newRead(), splits, withKind);
        rows.sort(Rows.order(builder.readType(), keys));
        for (ObjectNode row : rows) {
            out.println(MAPPER.writeValueAsString(row));
        }
    }

    private static List<ObjectNode> readRows(ReadBuilder builder, TableRead read, List<Split> splits, boolean withKind)
            throws Exception {
        RowType type = builder.readType();
        List<ObjectNode> rows = new ArrayList<>();
        if (splits.isEmpty()) {
            return rows;
        }
        try (RecordReader<InternalRow> reader = read.createReader(splits)) {
            reader.forEachRemaining(row -> {
                ObjectNode json = Values.JSON.objectNode();
                if (withKind) {
                    json.put(ROWKIND, row.getRowKind().shortString());
                }
                json.setAll(Values.rowToJson(row, type));
                rows.add(json);
            });
        }
        return rows;
    }

    private void stream(Catalog catalog, Identifier id, Args args) throws Exception {
        args.expect(0, "stream WAREHOUSE DB.TABLE [--from-snapshot N [--full]] [--max-rows K] [--timeout-ms T]");
        long maxRows = args.number("--max-rows", Long.MAX_VALUE);
        long timeoutMs = args.number("--timeout-ms", 5000);
        Table table = catalog.getTable(id);
        Map<String, String> options = new HashMap<>();
        String from = args.one("--from-snapshot");
        if (from != null) {
            args.number("--from-snapshot", 0);
            options.put("scan.mode", args.flags.contains("--full") ? "from-snapshot-full" : "from-snapshot");
            options.put("scan.snapshot-id", from);
        } else if (args.flags.contains("--full")) {
            throw new Usage("--full needs --from-snapshot");
        }
        table = table.copy(options);
        ReadBuilder builder = table.newReadBuilder();
        StreamTableScan scan = builder.newStreamScan();
        TableRead read = builder.newRead();
        long printed = 0;
        long lastNew = System.currentTimeMillis();
        while (printed < maxRows) {
            List<Split> splits;
            try {
                splits = scan.plan().splits();
            } catch (EndOfScanException e) {
                break;
            }
            List<ObjectNode> rows = readRows(builder, read, splits, true);
            if (rows.isEmpty()) {
                if (System.currentTimeMillis() - lastNew >= timeoutMs) {
                    break;
                }
                Thread.sleep(100);
                continue;
            }
            rows.sort(Rows.order(builder.readType(), table.primaryKeys()));
            for (ObjectNode row : rows) {
                if (printed >= maxRows) {
                    break;
                }
                out.println(MAPPER.writeValueAsString(row));
                printed++;
            }
            out.flush();
            lastNew = System.currentTimeMillis();
        }
    }

    private void snapshots(Catalog catalog, Identifier id, Args args) throws Exception {
        args.expect(0, "snapshots WAREHOUSE DB.TABLE");
        Table table = catalog.getTable(id);
        if (!(table instanceof DataTable)) {
            throw new Failure(id + " has no snapshots (a " + table.getClass().getSimpleName() + ")");
        }
        List<Snapshot> all = new ArrayList<>();
        Iterator<Snapshot> it = ((DataTable) table).snapshotManager().snapshots();
        it.forEachRemaining(all::add);
        all.sort((a, b) -> Long.compare(a.id(), b.id()));
        for (Snapshot s : all) {
            ObjectNode json = Values.JSON.objectNode();
            json.put("id", s.id());
            json.put("schemaId", s.schemaId());
            json.put("commitKind", s.commitKind().name());
            json.put("totalRecordCount", s.totalRecordCount());
            json.put("deltaRecordCount", s.deltaRecordCount());
            json.put("changelogRecordCount", s.changelogRecordCount());
            json.set("properties", s.properties() == null ? Values.JSON.nullNode() : MAPPER.valueToTree(s.properties()));
            json.put("timeMillis", s.timeMillis());
            json.put("commitIdentifier", s.commitIdentifier());
            out.println(MAPPER.writeValueAsString(json));
        }
    }

    private void schema(Catalog catalog, Identifier id, Args args) throws Exception {
        args.expect(0, "schema WAREHOUSE DB.TABLE");
        Table table = catalog.getTable(id);
        ObjectNode json = Values.JSON.objectNode();
        ArrayNode columns = json.putArray("columns");
        for (DataField field : table.rowType().getFields()) {
            ArrayNode column = columns.addArray().add(field.name()).add(field.type().asSQLString());
            if (field.description() != null) {
                column.add(field.description());
            }
        }
        json.set("primary_keys", MAPPER.valueToTree(table.primaryKeys()));
        json.set("partition_keys", MAPPER.valueToTree(table.partitionKeys()));
        Map<String, String> options = new java.util.TreeMap<>(table.options());
        options.remove("path"); // the table's location, added on load: not a schema option
        json.set("options", MAPPER.valueToTree(options));
        table.comment().ifPresent(c -> json.put("comment", c));
        if (table instanceof FileStoreTable) {
            json.put("schema_id", ((FileStoreTable) table).schema().id());
        }
        out.println(MAPPER.writeValueAsString(json));
    }

    // ---------------------------------------------------------------- writing

    private void create(Catalog catalog, Identifier id, Args args) throws Exception {
        args.expect(0, "create WAREHOUSE DB.TABLE [--ignore-if-exists] < SPEC");
        JsonNode spec = MAPPER.readTree(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        if (spec == null || !spec.isObject()) {
            throw new Failure("the create spec on stdin must be a JSON object");
        }
        Set<String> known = Set.of("columns", "primary_keys", "partition_keys", "options", "comment");
        for (Map.Entry<String, JsonNode> e : spec.properties()) {
            if (!known.contains(e.getKey())) {
                throw new Failure("unknown key \"" + e.getKey() + "\" in the create spec (known: " + known + ")");
            }
        }
        Schema.Builder schema = Schema.newBuilder();
        JsonNode columns = spec.get("columns");
        if (columns == null || !columns.isArray() || columns.isEmpty()) {
            throw new Failure("the create spec needs \"columns\": [[NAME, TYPE], ...]");
        }
        for (JsonNode column : columns) {
            if (!column.isArray() || column.size() < 2 || column.size() > 3
                    || !column.get(0).isTextual() || !column.get(1).isTextual()) {
                throw new Failure("a column is [NAME, TYPE] or [NAME, TYPE, COMMENT], not " + column);
            }
            DataType type = parseType(column.get(1).textValue());
            String comment = column.size() == 3 ? column.get(2).asText() : null;
            schema.column(column.get(0).textValue(), type, comment);
        }
        schema.primaryKey(strings(spec, "primary_keys"));
        schema.partitionKeys(strings(spec, "partition_keys"));
        JsonNode options = spec.get("options");
        if (options != null && !options.isNull()) {
            if (!options.isObject()) {
                throw new Failure("\"options\" must be an object of strings");
            }
            for (Map.Entry<String, JsonNode> e : options.properties()) {
                JsonNode v = e.getValue();
                schema.option(e.getKey(), v.isTextual() ? v.textValue() : v.toString());
            }
        }
        if (spec.hasNonNull("comment")) {
            schema.comment(spec.get("comment").asText());
        }
        catalog.createDatabase(id.getDatabaseName(), true);
        catalog.createTable(id, schema.build(), args.flags.contains("--ignore-if-exists"));
    }

    private static List<String> strings(JsonNode spec, String key) {
        List<String> out = new ArrayList<>();
        JsonNode node = spec.get(key);
        if (node == null || node.isNull()) {
            return out;
        }
        if (!node.isArray()) {
            throw new Failure("\"" + key + "\" must be an array of column names");
        }
        for (JsonNode name : node) {
            if (!name.isTextual()) {
                throw new Failure("\"" + key + "\" must be an array of column names, not " + node);
            }
            out.add(name.textValue());
        }
        return out;
    }

    private static DataType parseType(String text) {
        try {
            return DataTypeJsonParser.parseAtomicTypeSQLString(text.trim());
        } catch (RuntimeException e) {
            throw new Failure("cannot parse type \"" + text + "\": "
                    + Objects.toString(e.getMessage(), e.toString()).replaceAll("\\s+", " "));
        }
    }

    private void write(Catalog catalog, Identifier id, Args args) throws Exception {
        args.expect(0, "write WAREHOUSE DB.TABLE [--option KEY=VALUE ...] < ROWS");
        Table table = catalog.getTable(id);
        Map<String, String> options = args.keyValues("--option");
        if (!options.isEmpty()) {
            table = table.copy(options);
        }
        RowType type = table.rowType();
        List<GenericRow> rows = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        int lineNo = 0;
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            lineNo++;
            if (line.isBlank()) {
                continue;
            }
            try {
                JsonNode node = MAPPER.readTree(line);
                if (!node.isObject()) {
                    throw new Failure("a row is a JSON object");
                }
                RowKind kind = RowKind.INSERT;
                JsonNode kindNode = node.get(ROWKIND);
                if (kindNode != null && !kindNode.isNull()) {
                    kind = rowKind(kindNode.asText());
                }
                GenericRow row = Values.rowFromJson((ObjectNode) node, type, "", ROWKIND);
                row.setRowKind(kind);
                rows.add(row);
            } catch (Failure | IllegalArgumentException e) {
                throw new Failure("stdin line " + lineNo + ": " + e.getMessage());
            } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
                throw new Failure("stdin line " + lineNo + ": not JSON: " + e.getOriginalMessage());
            }
        }
        BatchWriteBuilder builder = table.newBatchWriteBuilder();
        try (IOManager io = IOManager.create(System.getProperty("java.io.tmpdir"));
                BatchTableWrite write = builder.newWrite();
                BatchTableCommit commit = builder.newCommit()) {
            write.withIOManager(io);
            for (GenericRow row : rows) {
                write.write(row);
            }
            commit.commit(write.prepareCommit());
        }
        printLatestSnapshot(catalog, id);
    }

    private static RowKind rowKind(String text) {
        switch (text) {
            case "+I":
                return RowKind.INSERT;
            case "-U":
                return RowKind.UPDATE_BEFORE;
            case "+U":
                return RowKind.UPDATE_AFTER;
            case "-D":
                return RowKind.DELETE;
            default:
                throw new Failure("_rowkind must be +I, -U, +U or -D, not \"" + text + "\"");
        }
    }

    private void compact(Catalog catalog, Identifier id, Args args) throws Exception {
        args.expect(0, "compact WAREHOUSE DB.TABLE [--full] [--option KEY=VALUE ...]");
        Table table = catalog.getTable(id);
        Map<String, String> options = args.keyValues("--option");
        if (!options.isEmpty()) {
            table = table.copy(options);
        }
        boolean full = args.flags.contains("--full");
        Map<BinaryRow, Set<Integer>> buckets = new LinkedHashMap<>();
        for (Split split : table.newReadBuilder().newScan().plan().splits()) {
            if (!(split instanceof DataSplit)) {
                throw new Failure(id + " gave a " + split.getClass().getSimpleName() + ", not a data split");
            }
            DataSplit data = (DataSplit) split;
            buckets.computeIfAbsent(data.partition(), p -> new LinkedHashSet<>()).add(data.bucket());
        }
        BatchWriteBuilder builder = table.newBatchWriteBuilder();
        try (IOManager io = IOManager.create(System.getProperty("java.io.tmpdir"));
                BatchTableWrite write = builder.newWrite();
                BatchTableCommit commit = builder.newCommit()) {
            write.withIOManager(io);
            for (Map.Entry<BinaryRow, Set<Integer>> e : buckets.entrySet()) {
                for (int bucket : e.getValue()) {
                    write.compact(e.getKey(), bucket, full);
                }
            }
            commit.commit(write.prepareCommit());
        }
        printLatestSnapshot(catalog, id);
    }

    private void printLatestSnapshot(Catalog catalog, Identifier id) throws Exception {
        Table table = catalog.getTable(id);
        Long latest = table instanceof DataTable
                ? ((DataTable) table).snapshotManager().latestSnapshotIdFromFileSystem()
                : table.latestSnapshot().map(Snapshot::id).orElse(null);
        out.println(latest == null ? "null" : latest.toString());
    }

    private void expire(Catalog catalog, Identifier id, Args args) throws Exception {
        args.expect(0, "expire WAREHOUSE DB.TABLE --retain-max N [--retain-min M]");
        if (args.one("--retain-max") == null) {
            throw new Usage("expire needs --retain-max N");
        }
        int max = (int) args.number("--retain-max", 0);
        int min = (int) args.number("--retain-min", 1);
        Table table = catalog.getTable(id);
        int expired = table.newExpireSnapshots()
                .config(ExpireConfig.builder().snapshotRetainMax(max).snapshotRetainMin(min).build())
                .expire();
        out.println(expired);
    }

    private void alter(Catalog catalog, Identifier id, Args args) throws Exception {
        List<String> p = args.positional;
        if (p.isEmpty()) {
            throw new Usage("alter needs a change: add-column, add-column-first, widen-column, drop-column, "
                    + "rename-column, move-column, set-option or remove-option");
        }
        String what = p.get(0);
        SchemaChange change;
        switch (what) {
            case "add-column":
                need(p, 3, "alter WAREHOUSE DB.TABLE add-column NAME TYPE");
                change = SchemaChange.addColumn(p.get(1), parseType(String.join(" ", p.subList(2, p.size()))));
                break;
            case "add-column-first":
                need(p, 3, "alter WAREHOUSE DB.TABLE add-column-first NAME TYPE");
                change = SchemaChange.addColumn(
                        p.get(1),
                        parseType(String.join(" ", p.subList(2, p.size()))),
                        null,
                        SchemaChange.Move.first(p.get(1)));
                break;
            case "move-column":
                if (p.size() == 3 && p.get(2).equals("first")) {
                    change = SchemaChange.updateColumnPosition(SchemaChange.Move.first(p.get(1)));
                } else if (p.size() == 4 && p.get(2).equals("after")) {
                    change = SchemaChange.updateColumnPosition(SchemaChange.Move.after(p.get(1), p.get(3)));
                } else {
                    throw new Usage("alter WAREHOUSE DB.TABLE move-column NAME first | move-column NAME after OTHER");
                }
                break;
            case "widen-column":
                need(p, 3, "alter WAREHOUSE DB.TABLE widen-column NAME TYPE");
                change = SchemaChange.updateColumnType(
                        p.get(1), parseType(String.join(" ", p.subList(2, p.size()))), true);
                break;
            case "drop-column":
                args.expect(2, "alter WAREHOUSE DB.TABLE drop-column NAME");
                change = SchemaChange.dropColumn(p.get(1));
                break;
            case "rename-column":
                args.expect(3, "alter WAREHOUSE DB.TABLE rename-column NAME NEW");
                change = SchemaChange.renameColumn(p.get(1), p.get(2));
                break;
            case "set-option":
                args.expect(3, "alter WAREHOUSE DB.TABLE set-option KEY VALUE");
                change = SchemaChange.setOption(p.get(1), p.get(2));
                break;
            case "remove-option":
                args.expect(2, "alter WAREHOUSE DB.TABLE remove-option KEY");
                change = SchemaChange.removeOption(p.get(1));
                break;
            default:
                throw new Usage("unknown alter change " + what);
        }
        catalog.alterTable(id, change, false);
    }

    private static void need(List<String> p, int min, String shape) {
        if (p.size() < min) {
            throw new Usage("expected " + shape);
        }
    }

    private static long snapshotId(String text) {
        try {
            return Long.parseLong(text);
        } catch (NumberFormatException e) {
            throw new Usage("a snapshot id is a number, not " + text);
        }
    }
}
