import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;


/**
 * Runs Java programs' main methods one after another in this one JVM, so a test pays for a JVM
 * start once per pytest worker instead of once per Kafka tool or Java client call (see
 * tests/integration/java_server.py, its only user).
 *
 * <p>It needs nothing on its classpath but the programs it runs. Requests on stdin, answers on stdout, every string as a 4-byte big-endian length and its
 * UTF-8 bytes. A request: the main class, the number of arguments, the arguments, the text the
 * program reads on System.in. An answer: the exit status as a string, then what the program
 * wrote on System.out and on System.err. Kafka's tools end with
 * org.apache.kafka.common.utils.Exit, whose exit and halt procedures here unwind the program
 * instead of ending the JVM; the first status a program exits with is its status (as it would
 * be in a JVM of its own), and a main that returns exits 0. System.out and System.err are
 * switched to the running program's buffers, so loggers that kept them at start-up still write
 * to the program's output, as they would in a JVM of its own.
 */
public final class MainServer {
    /** Thrown by the exit procedure: unwinds the program's main. */
    private static final class ExitCalled extends RuntimeException {
        ExitCalled() {
            super(null, null, false, false);
        }
    }

    /** Where System.out and System.err write: the running program's buffer, else stderr. */
    private static final class Switch extends OutputStream {
        private final OutputStream idle;
        private volatile OutputStream target;

        Switch(OutputStream idle) {
            this.idle = idle;
            this.target = idle;
        }

        @Override
        public void write(int b) throws IOException {
            target.write(b);
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            target.write(b, off, len);
        }

        @Override
        public void flush() throws IOException {
            target.flush();
        }
    }

    /** Kafka's Exit: kafka-clients 4.4 moved it into internals (the tools' 4.3 jars have the
     * first, the Java client's 4.4 jars the second). */
    private static final String[] EXIT_CLASSES = {
        "org.apache.kafka.common.utils.Exit", "org.apache.kafka.common.utils.internals.Exit",
    };

    private static Switch out;
    private static Switch err;

    /** Where a program's output goes once it has exited: a JVM of its own would be gone. */
    private static final OutputStream DISCARD = OutputStream.nullOutputStream();

    /** The first status the running program exited with through Exit, or null. */
    private static volatile Integer firstExit;

    private MainServer() {}

    public static void main(String[] args) throws Exception {
        DataInputStream requests = new DataInputStream(new FileInputStream(FileDescriptor.in));
        DataOutputStream answers = new DataOutputStream(new FileOutputStream(FileDescriptor.out));
        // Streams set once: a logger that keeps the System.out it saw at start-up still writes
        // to the program running now, and nothing but answers reaches this JVM's stdout.
        OutputStream idle = new FileOutputStream(FileDescriptor.err);
        out = new Switch(idle);
        err = new Switch(idle);
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        for (String exit : EXIT_CLASSES) {
            catchExits(exit);
        }
        while (true) {
            String mainClass;
            try {
                mainClass = readString(requests);
            } catch (EOFException closed) {
                // The test process is gone: end even if a program left threads running.
                System.exit(0);
                return;
            }
            String[] programArgs = new String[requests.readInt()];
            for (int i = 0; i < programArgs.length; i++) {
                programArgs[i] = readString(requests);
            }
            System.setIn(new ByteArrayInputStream(readBytes(requests)));
            ByteArrayOutputStream programOut = new ByteArrayOutputStream();
            ByteArrayOutputStream programErr = new ByteArrayOutputStream();
            out.target = programOut;
            err.target = programErr;
            int status = run(mainClass, programArgs);
            System.out.flush();
            System.err.flush();
            out.target = idle;
            err.target = idle;
            writeBytes(answers, Integer.toString(status).getBytes(StandardCharsets.UTF_8));
            writeBytes(answers, programOut.toByteArray());
            writeBytes(answers, programErr.toByteArray());
            answers.flush();
        }
    }

    /** Sets `exitClass`'s exit and halt procedures to exitCalled, if it is on the classpath. */
    private static void catchExits(String exitClass) throws ReflectiveOperationException {
        Class<?> exit;
        try {
            exit = Class.forName(exitClass);
        } catch (ClassNotFoundException absent) {
            return;
        }
        Class<?> procedure = Class.forName(exitClass + "$Procedure");
        Object unwind = Proxy.newProxyInstance(procedure.getClassLoader(),
                new Class<?>[] {procedure}, (proxy, method, args) -> {
                    if (!method.getName().equals("execute")) {
                        return method.invoke(MainServer.class, args);
                    }
                    exitCalled((Integer) args[0]);
                    return null;
                });
        exit.getMethod("setExitProcedure", procedure).invoke(null, unwind);
        exit.getMethod("setHaltProcedure", procedure).invoke(null, unwind);
    }

    private static void exitCalled(int status) {
        if (firstExit == null) {
            firstExit = status;
            System.out.flush();
            System.err.flush();
            out.target = DISCARD;
            err.target = DISCARD;
        }
        throw new ExitCalled();
    }

    private static int run(String mainClass, String[] args) {
        firstExit = null;
        int status;
        try {
            Method main = Class.forName(mainClass).getMethod("main", String[].class);
            main.invoke(null, (Object) args);
            status = 0;
        } catch (InvocationTargetException thrown) {
            status = crashed(thrown.getCause());
        } catch (ReflectiveOperationException | RuntimeException | Error thrown) {
            status = crashed(thrown);
        }
        // A program's own catch may turn the unwinding exit into another exception or a return:
        // the status it exited with first is the one a JVM of its own would have ended with.
        Integer exited = firstExit;
        return exited != null ? exited : status;
    }

    /** A main that ended in an exception exits 1 after printing it, as the java launcher does. */
    private static int crashed(Throwable thrown) {
        if (firstExit == null && !(thrown instanceof ExitCalled)) {
            System.err.print("Exception in thread \"main\" ");
            thrown.printStackTrace();
        }
        return 1;
    }

    private static String readString(DataInputStream in) throws IOException {
        return new String(readBytes(in), StandardCharsets.UTF_8);
    }

    private static byte[] readBytes(DataInputStream in) throws IOException {
        byte[] bytes = new byte[in.readInt()];
        in.readFully(bytes);
        return bytes;
    }

    private static void writeBytes(DataOutputStream out, byte[] bytes) throws IOException {
        out.writeInt(bytes.length);
        out.write(bytes);
    }
}
