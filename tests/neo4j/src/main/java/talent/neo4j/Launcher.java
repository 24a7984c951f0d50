package talent.neo4j;

import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;

/**
 * A Neo4j 5 Community DBMS in this JVM with its Bolt connector on 127.0.0.1:PORT, auth on.
 *
 * <p>Usage: {@code java -cp ... talent.neo4j.Launcher HOME PORT}; the password of user
 * {@code neo4j} comes from the environment variable {@code NEO4J_PASSWORD} (not argv: the
 * command line is visible to every user). It is set at each start, so a kept data dir
 * started again with a new password takes the new one. Runs until SIGTERM/SIGINT, then
 * shuts the DBMS down cleanly. Started and stopped by tests/neo4j/neo4j_ctl.py.
 */
public final class Launcher {
    private Launcher() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: Launcher HOME PORT (password in $NEO4J_PASSWORD)");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        int port = Integer.parseInt(args[1]);
        String password = System.getenv("NEO4J_PASSWORD");
        if (password == null || password.length() < 8) {
            System.err.println("NEO4J_PASSWORD must be set (8+ characters)");
            System.exit(2);
        }
        SocketAddress bolt = new SocketAddress("127.0.0.1", port);
        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
                .setConfig(Map.of(
                        GraphDatabaseSettings.auth_enabled, true,
                        GraphDatabaseSettings.default_listen_address, new SocketAddress("127.0.0.1"),
                        GraphDatabaseSettings.default_advertised_address, new SocketAddress("127.0.0.1"),
                        BoltConnector.enabled, true,
                        BoltConnector.listen_address, bolt,
                        // neo4j:// URIs ask for a routing table: it must name this port
                        BoltConnector.advertised_address, bolt,
                        BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED,
                        // a development/test server: small caches, little disk
                        GraphDatabaseSettings.pagecache_memory, 256L * 1024 * 1024,
                        GraphDatabaseSettings.keep_logical_logs, "1 files",
                        GraphDatabaseSettings.preallocate_logical_logs, false))
                .build();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.out.println("shutting down");
            dbms.shutdown();
            stopped.countDown();
        }));
        // The default user neo4j/neo4j must change its password before any other query;
        // set ours (through the embedded API, which needs no login).
        dbms.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME).executeTransactionally(
                "ALTER USER neo4j SET PLAINTEXT PASSWORD $password CHANGE NOT REQUIRED",
                Map.of("password", password));
        System.out.println("neo4j " + org.neo4j.kernel.internal.Version.getNeo4jVersion()
                + " ready: bolt://" + bolt + " home " + home);
        stopped.await();
    }
}
